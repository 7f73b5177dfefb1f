"""Rollout bodies: requests encoded once per candidate; answers read within bounds.

Requests: the queue sends one candidate to many seeds, so :class:`CandidateBody` validates
and encodes the candidate's part of the JSON once and splices each seed in, instead of a
request model built, validated, dumped and JSON-encoded again for every rollout.

Answers: a container may answer a trace of any size. Held naively, memory grows many times
the answer size: every rollout in flight would hold its whole body, a decoded copy, parsed
objects and re-dumped copies at once, and every kept result its full trace though only a
capped form is stored. So:

- a body is read as a stream and refused past the cap (nothing more is read; a declared
  ``Content-Length`` over it is refused before any read);
- at most ``BIG_BODIES`` bodies over ``BIG_BODY_BYTES`` are held at once (the others wait
  before reading on), and they are parsed one at a time on one thread: each new thread
  gets its own malloc arena, which keeps freed memory;
- a trace over the workspace's trace cap is shrunk right after the parse, so only the
  capped form, exactly what the workspace stores, outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from schemas import Policy, RolloutRequest, RolloutResponse, Trace, parse_rollout
from workspace.codec import decode_trace, encode_trace

__all__ = [
    "BIG_BODIES",
    "BIG_BODY_BYTES",
    "BodyReader",
    "CandidateBody",
    "ParsedRollout",
    "RolloutBody",
]

# Parsing 8 MiB of small JSON objects holds several times its size in Python objects.
BIG_BODY_BYTES = 1024 * 1024
BIG_BODIES = 2

ParsedRollout = tuple[RolloutResponse, dict[str, Any], bool]
"""The checked response (its trace moved out), the trace to keep, and whether it was shrunk."""


def _json(value: Any) -> bytes:
    """JSON as httpx's ``json=`` sends it: compact, UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class RolloutBody:
    """One ``POST /rollout`` body, encoded: its JSON and its seed (which errors name)."""

    seed: str
    content: bytes

    @classmethod
    def of(cls, request: RolloutRequest) -> RolloutBody:
        """The body of ``request``."""
        return cls(request.seed, _json(request.model_dump(mode="json")))


class CandidateBody:
    """The ``POST /rollout`` bodies of one candidate: checked and encoded once, seeds spliced in.

    ``for_seed(seed)`` is the JSON of ``RolloutRequest(..., seed=seed)`` (keys in another
    order): the request is validated here, so a component that is not text fails before
    any rollout, as it would per rollout.
    """

    def __init__(
        self, run_id: str, candidate_id: str, components: Mapping[str, str], policy: Policy
    ) -> None:
        request = RolloutRequest(
            run_id=run_id,
            candidate_id=candidate_id,
            candidate=dict(components),
            seed="-",
            policy=policy,
        )
        fields = request.model_dump(mode="json", exclude={"seed"})
        self._head = _json(fields)[:-1] + b',"seed":'

    def for_seed(self, seed: str) -> RolloutBody:
        """The body for ``seed``; an empty seed is refused as ``RolloutRequest`` refuses it."""
        if not seed:
            RolloutRequest(candidate={}, seed=seed)  # raises the ValidationError naming seed
        return RolloutBody(seed, self._head + _json(seed) + b"}")


def parse_and_cap(
    body: bytes | bytearray, reward_range: tuple[float, float], trace_cap: int | None
) -> ParsedRollout:
    """Check a 200 body (``InvalidRollout`` when it cannot be scored) and cap its trace."""
    response = parse_rollout(body, reward_range=reward_range)
    trace = response.trace
    # The parsed lists, not copies: the trace is held once, outside the response.
    kept = {"messages": trace.messages, "tool_calls": trace.tool_calls, "events": trace.events}
    response.trace = Trace()  # the response is ours alone, fresh from the parse: no copy
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
