"""How values are encoded in the database: compact JSON, and traces as zlib-compressed JSON.

A trace is stored compressed and must fit ``cap_bytes`` once compressed. One that does not
is shrunk, keeping its shape (every key, the head and tail of each list, the start of each
long string), with halving limits until it fits. A shrunk trace says so twice: the row's
``trace_truncated`` flag and a ``"_truncated"`` key with the original size and the cap.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

from schemas.exceptions import WorkspaceError

__all__ = [
    "MIN_TRACE_CAP",
    "EncodedTrace",
    "decode_trace",
    "dumps",
    "encode_trace",
    "finite",
    "loads",
    "strict_json",
]

MIN_TRACE_CAP = 1024
_LEVEL = 6


def dumps(value: Any, *, what: str = "value") -> str:
    """Compact JSON text of ``value``; a value JSON cannot hold is a ``WorkspaceError``."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise WorkspaceError(f"cannot store {what}: it is not JSON ({exc})") from exc


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by ``None`` (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def strict_json(value: Any, *, indent: int | None = 2) -> str:
    """JSON text any parser reads: non-finite numbers become ``null``, never bare ``NaN``."""
    return json.dumps(finite(value), indent=indent, default=str, allow_nan=False)


def loads(text: str | bytes | None, default: Any = None) -> Any:
    """Parse JSON text stored by :func:`dumps`; ``None`` gives ``default``."""
    if text is None:
        return default
    return json.loads(text)


@dataclass(frozen=True)
class EncodedTrace:
    """A trace ready for the ``rollouts.trace`` column."""

    blob: bytes | None  # None for an empty trace
    truncated: bool
    raw_bytes: int  # size of the original JSON, before compression or truncation


def encode_trace(trace: dict[str, Any], cap_bytes: int, *, text: str | None = None) -> EncodedTrace:
    """Compress ``trace``; shrink it first if the compressed form exceeds ``cap_bytes``.

    ``text``, when given, is ``dumps(trace)`` already computed by the caller.
    """
    if not trace:
        return EncodedTrace(None, False, 0)
    raw = (text if text is not None else dumps(trace, what="trace")).encode()
    blob = zlib.compress(raw, _LEVEL)
    if len(blob) <= cap_bytes:
        return EncodedTrace(blob, False, len(raw))
    marker = {"original_bytes": len(raw), "cap_bytes": cap_bytes}
    max_chars, max_items = max(cap_bytes, 64), 512
    while max_chars > 16 or max_items > 2:
        shrunk = _shrink(trace, max_chars, max_items)
        shrunk["_truncated"] = marker
        blob = zlib.compress(dumps(shrunk, what="trace").encode(), _LEVEL)
        if len(blob) <= cap_bytes:
            return EncodedTrace(blob, True, len(raw))
        max_chars, max_items = max(max_chars // 2, 16), max(max_items // 2, 2)
    # Even the skeleton is too big (thousands of keys): keep only the marker.
    blob = zlib.compress(dumps({"_truncated": marker}).encode(), _LEVEL)
    return EncodedTrace(blob, True, len(raw))


def decode_trace(blob: bytes | None) -> dict[str, Any]:
    """The trace dict stored by :func:`encode_trace`."""
    if blob is None:
        return {}
    try:
        value = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError) as exc:
        raise WorkspaceError(f"a stored trace is corrupt: {exc}") from exc
    return value if isinstance(value, dict) else {"value": value}


def _shrink(value: Any, max_chars: int, max_items: int) -> Any:
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        return f"{value[:max_chars]}...[{len(value) - max_chars} chars truncated]"
    if isinstance(value, dict):
        return {k: _shrink(v, max_chars, max_items) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) <= max_items:
            return [_shrink(v, max_chars, max_items) for v in value]
        head, tail = max_items // 2, max_items - max_items // 2
        kept = [_shrink(v, max_chars, max_items) for v in (*value[:head], *value[-tail:])]
        note = f"...[{len(value) - max_items} items truncated]..."
        return [*kept[:head], note, *kept[head:]]
    return value
