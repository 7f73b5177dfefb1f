"""One scrubber for everything stored or printed: credentials never reach the database or a log.

Two kinds of secret are masked (replaced by ``***``):

- the ones the process *knows*: a :class:`Scrubber` is told the run's reflection API key,
  container token and service token (``add``) and masks those exact values wherever they
  appear, whatever they look like (an endpoint that echoes the key in its 401 message
  must not get it stored). Values under 8 characters are not registered: too likely to be
  ordinary words (and too weak to be real keys) to mask everywhere.
- the ones it can only *recognise*, in every string: ``Bearer <token>`` and
  ``Authorization: Basic <token>``; prefixed keys (``sk-...``, ``ghp_...``, ``hf_...``,
  ``xox?-...``, ``AKIA...``); credentials in URLs (``http://user:pass@host`` ->
  ``http://***@host``, ``?api-key=...``, ``&token=...``); and a key-shaped word (20+
  characters of letters, digits and ``._~+/=-`` with at least one digit and one letter)
  right after "key", "token", "secret", "password" or "credential(s)".

In a JSON-like value, a string under a dict key that looks sensitive (``token``,
``api_key``, ``secret``, ``password``, ``authorization``, ``cookie``; any case, anywhere in
the key) becomes ``"***"``, as does every string nested below it; numbers stay
(``input_tokens: 12`` is a count). A key ending in ``_env`` whose value is an environment
variable *name* (``reflection_api_key_env: "OPENAI_API_KEY"``) is kept: a resume needs it.

The workspace owns one ``Scrubber`` (``Workspace.scrubber``) and applies it to run errors,
states and configs, event payloads, rollout errors, feedback and traces; the clients that
hold a key scrub their own error messages with one too, so what reaches stderr is clean.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "MASK",
    "MIN_SECRET_CHARS",
    "Scrubber",
    "is_sensitive_key",
    "may_hold_secret",
    "scrub",
    "scrub_text",
]

MASK = "***"
MIN_SECRET_CHARS = 8
_SENSITIVE_KEY = re.compile(r"token|api[_-]?key|secret|password|passwd|authorization|cookie", re.I)
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_TOKEN = r"[A-Za-z0-9._~+/=-]"
_BEARER = re.compile(rf"(?i)\b(bearer)\s+{_TOKEN}{{4,}}")
_BASIC = re.compile(r"(?i)\b(authorization\W{0,4}basic)\s+[A-Za-z0-9+/=._-]{4,}")
_PREFIXED = re.compile(
    r"\b(?P<p>sk-|pk-|rk-|gh[pousr]_|hf_|xox[abprs]-)[A-Za-z0-9_-]{16,}|\b(?P<a>AKIA)[0-9A-Z]{16}\b"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@\"'<>]+@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;][^=&#\s?\"']*(?:key|token|secret|passw|pwd|auth|sig|credential|session)"
    r"[^=&#\s\"']*=)[^&#\s\"'<>]+"
)
_KEYWORD_TOKEN = re.compile(
    r"(?i)(\b(?:api[\s_-]?key|key|token|secret|password|passwd|passphrase|credentials?)s?\b"
    r"(?:[\s:=\"'`]|\b(?:provided|is|was|value)\b){1,12})"
    rf"({_TOKEN}{{20,}})"
)
# Lower-case needles that every match of the text patterns contains: most strings hold
# none, and a substring test is much cheaper than running the patterns.
_TEXT_NEEDLES = (
    "bearer", "basic", "sk-", "pk-", "rk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "hf_",
    "xox", "akia", "://", "key",
    "token", "secret", "passw", "pwd", "auth", "sig", "credential", "session",
)  # fmt: skip
_KEY_NEEDLES = ("api_key", "api-key", "apikey", "authorization", "cookie")
_ALL_NEEDLES = (*_TEXT_NEEDLES, *_KEY_NEEDLES)
_CHUNK = 1 << 20  # may_hold_secret lowers big texts a slice at a time (bounded memory)
# Under this many characters one regex search for all needles is faster than a substring
# test per needle (2-10x for the ids, statuses and short feedback the rollout queue stores
# per rollout); over it, the substring tests win.
_SHORT = 32


class _Needles:
    """A case-insensitive test for any of some lower-case needles, fast for short texts."""

    def __init__(self, needles: tuple[str, ...]) -> None:
        self.needles = needles
        self.overlap = max(len(n) for n in needles) - 1
        self._pattern = re.compile("|".join(re.escape(n) for n in needles))

    def in_lowered(self, lowered: str) -> bool:
        """Whether lower-cased ``lowered`` contains a needle."""
        if len(lowered) < _SHORT:
            return self._pattern.search(lowered) is not None
        return any(needle in lowered for needle in self.needles)

    def in_text(self, text: str) -> bool:
        """Whether ``text`` contains a needle, lowering at most ``_CHUNK`` characters at a time."""
        for start in range(0, max(len(text), 1), _CHUNK):
            if self.in_lowered(text[max(0, start - self.overlap) : start + _CHUNK].lower()):
                return True
        return False


_IN_TEXT = _Needles(_TEXT_NEEDLES)
_IN_JSON = _Needles(_ALL_NEEDLES)


@functools.lru_cache(maxsize=4096)
def _sensitive_name(key: str) -> bool:
    # Memoized: the same few keys (``feedback``, ``seed``, ``messages``) recur in every
    # event and trace the workspace stores.
    return _SENSITIVE_KEY.search(key) is not None


def is_sensitive_key(key: str, value: Any = None) -> bool:
    """Whether a dict entry ``key: value`` may hold a credential."""
    if not _sensitive_name(key):
        return False
    names_an_env_var = isinstance(value, str) and bool(_ENV_NAME.match(value))
    return not (key.lower().endswith("_env") and names_an_env_var)


def may_hold_secret(json_text: str) -> bool:
    """Whether the JSON text of a value may hold something :func:`scrub` would mask.

    A cheap superset test that lets callers skip walking a large value that holds no
    sensitive key and nothing secret-shaped.
    """
    return _IN_JSON.in_text(json_text)


def _mask_keyword_token(match: re.Match[str]) -> str:
    token = match.group(2).rstrip(".")  # a sentence's full stop is not part of the key
    looks_random = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
    if not looks_random or len(token) < 20:
        return match.group(0)
    return f"{match.group(1)}{MASK}{match.group(2)[len(token) :]}"


def scrub_text(text: str) -> str:
    """``text`` with every recognisable credential masked (see the module docstring)."""
    if not text or not _IN_TEXT.in_lowered(text.lower()):
        return text
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _BASIC.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _PREFIXED.sub(lambda m: f"{m.group('p') or m.group('a')}{MASK}", text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _KEYWORD_TOKEN.sub(_mask_keyword_token, text)


def _walk(value: Any, text: Callable[[str], str], sensitive: bool) -> Any:
    if isinstance(value, str):
        return MASK if sensitive and value else text(value)
    if isinstance(value, dict):
        return {
            key: _walk(
                item, text, sensitive or (isinstance(key, str) and is_sensitive_key(key, item))
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_walk(item, text, sensitive) for item in value]
    return value


def scrub(value: Any, *, sensitive: bool = False) -> Any:
    """A copy of a JSON-like ``value`` with recognisable credentials masked."""
    return _walk(value, scrub_text, sensitive)


class Scrubber:
    """Masks the secrets it was told (exact values) and every recognisable credential.

    Share one per process part that stores or prints (the workspace has one); ``add``
    may be called at any time, a call only ever masks more.
    """

    def __init__(
        self, secrets: Iterable[str | None] = (), *, min_chars: int = MIN_SECRET_CHARS
    ) -> None:
        self._min_chars = min_chars
        self._known: tuple[str, ...] = ()
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """Mask these values from now on (``None``, empty and short values are ignored)."""
        fresh = {s for s in secrets if s and len(s) >= self._min_chars}
        # Also as it appears inside JSON text (escaped quotes, backslashes, controls).
        fresh |= {json.dumps(s)[1:-1] for s in fresh}
        # Longest first: a secret that contains another is masked whole.
        self._known = tuple(sorted(set(self._known) | fresh, key=len, reverse=True))

    def text(self, text: str) -> str:
        """``text`` with the known secrets and every recognisable credential masked."""
        if not text:
            return text
        for secret in self._known:
            if secret in text:
                text = text.replace(secret, MASK)
        return scrub_text(text)

    def value(self, value: Any, *, sensitive: bool = False) -> Any:
        """A copy of a JSON-like ``value`` with credentials masked."""
        return _walk(value, self.text, sensitive)

    def may_hold_secret(self, json_text: str) -> bool:
        """Whether ``value(json.loads(json_text))`` could differ from the value (a superset)."""
        return any(s in json_text for s in self._known) or may_hold_secret(json_text)
