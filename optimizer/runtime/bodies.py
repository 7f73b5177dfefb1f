"""Rollout answers read within bounds: a size cap, few big bodies at once, one parse at a time.

A container may answer a trace of any size. Before this module, memory grew ~60x the
answer size: every rollout in flight held its whole body, a decoded copy, parsed objects and
re-dumped copies at once, and every kept result held its full trace though only a capped
form was stored. Now:

- a body is read as a stream and refused past the cap (nothing more is read; a declared
  ``Content-Length`` over it is refused before any read);
- at most ``BIG_BODIES`` bodies over ``BIG_BODY_BYTES`` are held at once (the others wait
  before reading on), and they are parsed one at a time on one thread: each new thread
  gets its own malloc arena, which keeps freed memory (+100 MB with a thread pool);
- a trace over the workspace's trace cap is shrunk right after the parse, so only the
  capped form, exactly what the workspace stores, outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from schemas import RolloutResponse, Trace, parse_rollout
from workspace.codec import decode_trace, encode_trace

__all__ = ["BIG_BODIES", "BIG_BODY_BYTES", "BodyReader", "ParsedRollout"]

# Parsing 8 MiB of small JSON objects holds several times its size in Python objects.
BIG_BODY_BYTES = 1024 * 1024
BIG_BODIES = 2

ParsedRollout = tuple[RolloutResponse, dict[str, Any], bool]
"""The checked response (its trace moved out), the trace to keep, and whether it was shrunk."""


def parse_and_cap(
    body: bytes | bytearray, reward_range: tuple[float, float], trace_cap: int | None
) -> ParsedRollout:
    """Check a 200 body (``InvalidRollout`` when it cannot be scored) and cap its trace."""
    response = parse_rollout(body, reward_range=reward_range)
    trace = response.trace
    # The parsed lists, not copies: the trace is held once, outside the response.
    kept = {"messages": trace.messages, "tool_calls": trace.tool_calls, "events": trace.events}
    response = response.model_copy(update={"trace": Trace()})
    if trace_cap is None or len(body) <= trace_cap:
        return response, kept, False  # its JSON is smaller than the cap, compressed or not
    encoded = encode_trace(kept, trace_cap)
    if not encoded.truncated:
        return response, kept, False
    return response, decode_trace(encoded.blob), True


class BodyReader:
    """Reads and parses the answers of one client within its memory bounds."""

    def __init__(self) -> None:
        self._big_bodies = asyncio.Semaphore(BIG_BODIES)
        self._parsing = asyncio.Lock()
        self._thread: ThreadPoolExecutor | None = None

    async def read(
        self, response: httpx.Response, limit: int, held: contextlib.AsyncExitStack
    ) -> tuple[bytearray, bool]:
        """At most ``limit`` bytes of the (decoded) body, and whether that was all of it.

        A big body takes a big-body slot into ``held``; release it (close ``held``) once
        the body is parsed or dropped.
        """
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return bytearray(), False
        body, big = bytearray(), False
        async for chunk in response.aiter_bytes():
            if not big and len(body) + len(chunk) > BIG_BODY_BYTES:
                await held.enter_async_context(self._big_bodies)
                big = True
            body += chunk
            if len(body) > limit:
                del body[limit:]
                return body, False
        return body, True

    async def parse(
        self, body: bytearray, reward_range: tuple[float, float], trace_cap: int | None
    ) -> ParsedRollout:
        """:func:`parse_and_cap`, off the event loop and one at a time for a big body."""
        if len(body) <= BIG_BODY_BYTES:
            return parse_and_cap(body, reward_range, trace_cap)
        async with self._parsing:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="gepa-rollout-parse")
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._thread, parse_and_cap, body, reward_range, trace_cap
            )

    def close(self) -> None:
        """Stop the parse thread (it is started again if needed)."""
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None
