"""Defence in depth: keep credentials out of the database whatever the caller passes.

Runs already store ``RunConfig.redacted()``; on top of that every config, state, event
payload, trace and error text goes through :func:`scrub` before it is written:

- a string under a dict key that looks sensitive (``token``, ``api_key``, ``secret``,
  ``password``, ``authorization``, ``cookie``; any case, anywhere in the key) becomes
  ``"***"``, as does every string nested below such a key. Numbers stay: ``input_tokens: 12``
  is a count, not a credential.
- a key ending in ``_env`` whose value is an environment variable *name*
  (``reflection_api_key_env: "OPENAI_API_KEY"``) is kept: a resumed run needs the name.
- in every string, ``Bearer <token>`` and OpenAI-style ``sk-...`` keys are masked.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MASK", "is_sensitive_key", "may_hold_secret", "scrub", "scrub_text"]

MASK = "***"
_SENSITIVE_KEY = re.compile(r"token|api[_-]?key|secret|password|passwd|authorization|cookie", re.I)
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{4,}")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
# Lower-case needles that every match of the patterns above contains. Substring tests are
# ~20x faster than a case-insensitive regex alternation over a whole trace.
_TEXT_NEEDLES = ("bearer", "sk-")
_ALL_NEEDLES = (
    "token", "api_key", "api-key", "apikey", "secret", "password", "passwd", "authorization",
    "cookie", *_TEXT_NEEDLES,
)  # fmt: skip


def is_sensitive_key(key: str, value: Any = None) -> bool:
    """Whether a dict entry ``key: value`` may hold a credential."""
    if not _SENSITIVE_KEY.search(key):
        return False
    names_an_env_var = isinstance(value, str) and bool(_ENV_NAME.match(value))
    return not (key.lower().endswith("_env") and names_an_env_var)


def may_hold_secret(json_text: str) -> bool:
    """Whether the JSON text of a value may hold something :func:`scrub` would mask.

    A cheap superset test (one regex pass in C) that lets callers skip walking a large
    value that holds no sensitive key, no bearer token and no ``sk-`` key.
    """
    lowered = json_text.lower()
    return any(needle in lowered for needle in _ALL_NEEDLES)


def scrub_text(text: str) -> str:
    """``text`` with bearer tokens and ``sk-`` keys masked."""
    lowered = text.lower()
    if not any(needle in lowered for needle in _TEXT_NEEDLES):  # most strings hold neither
        return text
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _SK_KEY.sub(f"sk-{MASK}", text)


def scrub(value: Any, *, sensitive: bool = False) -> Any:
    """A copy of a JSON-like ``value`` with credentials masked (see the module docstring)."""
    if isinstance(value, str):
        return MASK if sensitive and value else scrub_text(value)
    if isinstance(value, dict):
        return {
            key: scrub(
                item,
                sensitive=sensitive or (isinstance(key, str) and is_sensitive_key(key, item)),
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub(item, sensitive=sensitive) for item in value]
    return value
