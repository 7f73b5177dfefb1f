"""Rollout bodies: requests encoded once per candidate; answers read within bounds (the cap,
and few big bodies held at once)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError

from optimizer.runtime.rollouts.bodies import (
    BIG_BODIES,
    BIG_BODY_BYTES,
    BodyReader,
    CandidateBody,
    RolloutBody,
    parse_and_cap,
)
from schemas import Policy, RolloutRequest

CHUNK = 256 * 1024


def _streamed(progress: Counter[int], index: int, chunks: int) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(chunks):
            progress[index] += 1
            yield b"x" * CHUNK

    return httpx.Response(200, content=body())


async def test_at_most_two_big_bodies_are_held_at_once() -> None:
    reader, progress = BodyReader(), Counter[int]()
    size = 3 * BIG_BODY_BYTES // CHUNK  # 3 MiB each
    stacks = [contextlib.AsyncExitStack() for _ in range(4)]
    reads = [
        asyncio.create_task(reader.read(_streamed(progress, i, size), 64 * BIG_BODY_BYTES, s))
        for i, s in enumerate(stacks)
    ]
    done: set[asyncio.Task[tuple[bytearray, bool]]] = set()
    while len(done) < BIG_BODIES:
        finished, _ = await asyncio.wait(
            set(reads) - done, timeout=10, return_when=asyncio.FIRST_COMPLETED
        )
        assert finished, "no big body was read"
        done |= finished
    await asyncio.sleep(0.2)  # room for the others to go on, if nothing held them
    waiting = [task for task in reads if not task.done()]
    assert len(done) == BIG_BODIES == 2 and len(waiting) == 2
    # The others stopped before reading past the big-body threshold (one chunk over it).
    for task in waiting:
        index = reads.index(task)
        assert progress[index] <= BIG_BODY_BYTES // CHUNK + 1
    for task in done:  # parsed or dropped: their slots are released
        await stacks[reads.index(task)].aclose()
    finished = await asyncio.gather(*waiting)
    assert [(len(body), complete) for body, complete in finished] == [(size * CHUNK, True)] * 2
    for stack in stacks:
        await stack.aclose()


async def test_a_body_over_the_limit_stops_being_read() -> None:
    progress = Counter[int]()
    async with contextlib.AsyncExitStack() as held:
        body, complete = await BodyReader().read(_streamed(progress, 0, 1000), CHUNK * 3, held)
    assert not complete and len(body) == CHUNK * 3
    assert progress[0] == 4  # the chunk that crossed the limit, then no more


def test_a_small_answer_keeps_its_trace_and_a_huge_one_is_capped() -> None:
    small = json.dumps({"reward": 0.5, "trace": {"events": [{"t": 1}]}}).encode()
    response, trace, truncated = parse_and_cap(small, (0.0, 1.0), 4096)
    assert response.reward == 0.5 and trace["events"] == [{"t": 1}] and not truncated
    assert response.trace.events == []  # the trace is held once, outside the response
    noise = random.Random(0).randbytes(100_000).hex()  # 200 KB that does not compress
    huge = {"reward": 1.0, "trace": {"messages": [{"role": "tool", "content": noise}]}}
    _, capped, truncated = parse_and_cap(json.dumps(huge).encode(), (0.0, 1.0), 4096)
    assert truncated and capped["_truncated"]["cap_bytes"] == 4096
    assert capped["_truncated"]["original_bytes"] > 200_000
    assert len(json.dumps(capped)) < 4096 * 8


@pytest.mark.parametrize(
    "seed", ["s1", 'a "quoted" seed', "back\\slash\nnewline", "café-🙂", "\u2028", "}"]
)
def test_a_candidate_body_is_the_json_of_its_request_for_every_seed(seed: str) -> None:
    components = {"system_prompt": 'Say "hi" \\ \u00e9\n', "tool": "{}"}
    policy = Policy(model="openai/gpt-4o-mini")
    body = CandidateBody("run-1", "cand-1", components, policy).for_seed(seed)
    request = RolloutRequest(
        run_id="run-1", candidate_id="cand-1", candidate=components, seed=seed, policy=policy
    )
    assert body.seed == seed
    assert json.loads(body.content) == request.model_dump(mode="json")
    assert json.loads(RolloutBody.of(request).content) == json.loads(body.content)


def test_a_candidate_body_refuses_what_a_request_refuses() -> None:
    body = CandidateBody("run-1", "cand-1", {"system_prompt": "x"}, Policy())
    with pytest.raises(ValidationError, match="seed"):
        body.for_seed("")
    with pytest.raises(ValidationError, match="candidate"):
        CandidateBody("run-1", "cand-1", {"system_prompt": 3}, Policy())  # type: ignore[dict-item]
