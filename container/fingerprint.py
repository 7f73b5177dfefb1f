"""The program fingerprint: what makes a cached rollout result still valid.

sha256 over the canonical JSON of the protocol version, the target id, kind, version and
baseline (and user template), the target function's source and its module's source, every dataset row, the
splits and the verifier (its spec, or its source for a Python verifier). The candidate is
not in it (the cache key adds it), nor is the rollout policy.

A baseline read from a prompt file or the prompt registry enters as where it is read from,
not as its text: no rollout's result depends on it (a rollout is given every text of its
candidate), so a new version of the prompt keeps every cached rollout, and checking an edited
prompt file pays only for the new text.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import TYPE_CHECKING, Any

from container.source import source_of
from schemas import PROTOCOL

if TYPE_CHECKING:
    from container.dataset import Dataset
    from container.splits import Splits
    from container.target import Target
    from container.verifiers import Verifier

__all__ = ["compute_fingerprint"]


def compute_fingerprint(
    target: Target, dataset: Dataset, splits: Splits, verifier: Verifier
) -> str:
    """The hex sha256 fingerprint of a served program."""
    module = inspect.getmodule(target.fn)
    parts: dict[str, Any] = {
        "protocol": PROTOCOL,
        "target": {
            "id": target.id,
            "kind": target.kind,
            "version": target.version,
            "baseline": (
                {"source": target.baseline_source}
                if target.baseline_source
                else dict(target.baseline)
            ),
            "user_template": target.template.user_template if target.template else None,
        },
        "target_source": source_of(target.fn),
        "module_source": source_of(module) if module is not None else "",
        "dataset": dataset.rows(),
        "splits": splits.as_dict(),
        "verifier": verifier.spec,
    }
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
