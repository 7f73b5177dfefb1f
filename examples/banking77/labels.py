"""Map a model's free-text answer to one of the 77 Banking77 labels.

In order: the stripped text is a label; its normalized form (lower case, every run of
non-alphanumerics as ``_``) is a label's; a label's name appears in the normalized text as
whole words (the earliest one wins, the longest on a tie, so ``card_payment_wrong_exchange_rate``
beats the ``exchange_rate`` inside it). Anything else is ``UNKNOWN``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["UNKNOWN", "normalize_label", "parse_label"]

UNKNOWN = "unknown"
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_label(text: str) -> str:
    """Lower case, each run of other characters as one ``_``, no ``_`` at the ends."""
    return _NON_ALNUM.sub("_", text.lower()).strip("_")


def parse_label(text: str | None, labels: Sequence[str]) -> str:
    """The label ``text`` names, or ``UNKNOWN``."""
    if not text:
        return UNKNOWN
    stripped = text.strip()
    if stripped in labels:
        return stripped
    normalized = normalize_label(stripped)
    by_norm = {normalize_label(label): label for label in labels}
    if normalized in by_norm:
        return by_norm[normalized]
    padded = f"_{normalized}_"
    found = [
        (padded.find(f"_{norm}_"), -len(norm), label)
        for norm, label in by_norm.items()
        if f"_{norm}_" in padded
    ]
    return min(found)[2] if found else UNKNOWN
