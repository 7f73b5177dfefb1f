"""Trace encoding: compression, the size cap, and how a trace is shrunk to fit it."""

from __future__ import annotations

import os
import zlib

import pytest

from schemas import WorkspaceError
from workspace import MIN_TRACE_CAP, decode_trace, encode_trace


def test_small_trace_round_trips_compressed() -> None:
    trace = {"messages": [{"role": "user", "content": "où est ma carte? " * 50}], "events": []}
    encoded = encode_trace(trace, 4096)
    assert not encoded.truncated and encoded.blob is not None
    assert len(encoded.blob) < encoded.raw_bytes / 5
    assert decode_trace(encoded.blob) == trace
    assert encode_trace({}, 4096).blob is None and decode_trace(None) == {}


def test_oversized_trace_keeps_its_shape_within_the_cap() -> None:
    items = [{"i": i, "blob": os.urandom(200).hex()} for i in range(400)]
    trace = {"messages": items, "meta": {"model": "qwen", "note": os.urandom(5000).hex()}}
    encoded = encode_trace(trace, 4096)
    assert encoded.truncated and encoded.blob is not None and len(encoded.blob) <= 4096
    shrunk = decode_trace(encoded.blob)
    assert shrunk["_truncated"] == {"original_bytes": encoded.raw_bytes, "cap_bytes": 4096}
    assert shrunk["meta"]["model"] == "qwen"
    assert shrunk["meta"]["note"].startswith(trace["meta"]["note"][:16])
    assert "chars truncated" in shrunk["meta"]["note"]
    kept = [m for m in shrunk["messages"] if isinstance(m, dict)]
    notes = [m for m in shrunk["messages"] if isinstance(m, str)]
    assert kept[0]["i"] == 0 and kept[-1]["i"] == 399  # head and tail survive
    assert len(notes) == 1 and "items truncated" in notes[0]


def test_a_trace_whose_skeleton_is_too_big_keeps_only_the_marker() -> None:
    trace = {f"k{i}-{os.urandom(8).hex()}": i for i in range(5000)}
    encoded = encode_trace(trace, MIN_TRACE_CAP)
    assert encoded.truncated and encoded.blob is not None
    assert len(encoded.blob) <= MIN_TRACE_CAP
    assert set(decode_trace(encoded.blob)) == {"_truncated"}


def test_corrupt_or_non_json_values_are_workspace_errors() -> None:
    with pytest.raises(WorkspaceError, match="corrupt"):
        decode_trace(b"not zlib")
    with pytest.raises(WorkspaceError, match="corrupt"):
        decode_trace(zlib.compress(b"{not json"))
    with pytest.raises(WorkspaceError, match="not JSON"):
        encode_trace({"x": {1, 2}}, 4096)
