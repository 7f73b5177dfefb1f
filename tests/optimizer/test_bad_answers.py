"""A container that answers 200 with something that cannot be scored, against a real server.

Each bad answer must be one errored rollout with its reason (stored, never scored, never
retried as a fault), not a failed run; a negative cost must not lower the spend; a huge
body is refused without being read past the cap; a timeout says it was one and how long.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.gate import ErrorGate
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.searches import run_optimization
from optimizer.testing import thread_server
from schemas import ContainerError, Program, RolloutFailed, RolloutRequest, RunConfig
from tests.fakes.hostile_container import HostileContainer, Slow, Stream
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from workspace import Workspace

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel", "fox", "gnu"]
CANDIDATE = {"system_prompt": "Answer with the label.\n- fox\n- gnu"}
MIB = 1024 * 1024
# seed -> (the 200 body it answers, what the errored rollout's reason must say)
BAD: dict[str, tuple[Any, str]] = {
    "ant-0": (b'{"reward": NaN, "feedback": "nan"}', "reward must be a finite number"),
    "bee-0": (b'{"reward": 7.0}', "reward 7.0 is outside the program's reward_range [0, 1]"),
    "cat-0": (b'{"reward": "0.9"}', "reward: Input should be a valid number (got '0.9')"),
    "cow-0": (b'{"reward": true}', "reward: Input should be a valid number (got True)"),
    "dog-0": (
        b'{"reward": 1.0, "usage": {"cost_usd": -5.0}}',
        "usage.cost_usd is -5.0: counts and costs must be finite and >= 0",
    ),
    "eel-0": (Stream(total=4 * MIB), "body over 1 MiB: refused unread"),
    "fox-1": (b"<html>oops</html>", "the body is not a gepa-container/1 rollout"),
}
GOOD = {
    "fox-0": (b'{"reward": 1.0, "usage": {"cost_usd": 0.25, "input_tokens": 12.0}}', None),
}


def _hostile(**answers: Any) -> HostileContainer:
    bodies = {seed: body for seed, (body, _) in {**BAD, **GOOD}.items()}
    return HostileContainer(RuleContainer(program(LABELS)), answers={**bodies, **answers})


@contextlib.asynccontextmanager
async def _queue(
    root: Path, url: str, budget: Budget, *, gate: ErrorGate | None = None, **client: Any
) -> AsyncIterator[RolloutQueue]:
    """A queue on a fresh workspace at ``root`` with a client of ``url`` (both closed after)."""
    policy = client.pop("policy", RetryPolicy(max_retries=2, base_delay_s=0.0))
    trace_cap = client.pop("trace_cap_bytes", 262144)
    async with Workspace(root, trace_cap_bytes=trace_cap) as ws:
        run = await ws.create_run(RunConfig(containers=[url]))
        container = ContainerClient([url], policy=policy, rng=random.Random(0), **client)
        try:
            async with RolloutQueue(
                client=container,
                workspace=ws,
                run_id=run.run_id,
                program=Program.model_validate(program(LABELS)),
                budget=budget,
                events=EventSink(ws, run.run_id),
                concurrency=4,
                error_gate=gate,
            ) as queue:
                yield queue
        finally:
            await container.aclose()


async def test_bad_answers_are_errored_rollouts_with_their_reason_and_never_retried(
    tmp_path: Path,
) -> None:
    hostile = _hostile()
    seeds = [*BAD, *GOOD, "gnu-0", "gnu-1"]
    budget = Budget(max_calls=100)
    with thread_server(hostile.app()) as url:
        async with _queue(tmp_path / "ws", url, budget, max_response_bytes=MIB) as queue:
            results = await queue.evaluate("c1", CANDIDATE, seeds)
    for seed, (_, reason) in BAD.items():
        record = results[seed].record
        assert results[seed].reward is None and record.status == "error", seed
        assert reason in (record.error or ""), (seed, record.error)
        assert f"seed {seed!r}" in (record.error or "")
        assert hostile.calls[seed] == 1, f"{seed} was retried: a bad answer is not a fault"
    assert {s: results[s].reward for s in ("fox-0", "gnu-0", "gnu-1")} == {
        "fox-0": 1.0, "gnu-0": 1.0, "gnu-1": 1.0,
    }  # fmt: skip
    assert results["fox-0"].record.usage.input_tokens == 12  # 12.0 is a count
    # The negative cost did not lower the spend: only the valid 0.25 counts.
    assert budget.student_cost_usd == pytest.approx(0.25)
    assert (budget.paid, budget.errors, budget.retries) == (len(seeds), len(BAD), 0)
    stored = sqlite3.connect(tmp_path / "ws" / "workspace.sqlite").execute(
        "SELECT seed, status, reward, error FROM rollouts"
    )
    rows = {seed: (status, reward, error) for seed, status, reward, error in stored}
    for seed, (_, reason) in BAD.items():
        status, reward, error = rows[seed]
        assert (status, reward) == ("error", None) and reason in error


class CountingTransport(httpx.AsyncBaseTransport):
    """A real HTTP transport that counts the body bytes the client actually read."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.read = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, self),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Counted(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, owner: CountingTransport) -> None:
        self.stream, self.owner = stream, owner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.owner.read += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
async def test_an_oversized_body_is_not_read_past_the_cap(tmp_path: Path, declared: bool) -> None:
    # 64 MiB of trace: streamed without a length, the client stops reading at its 1 MiB
    # cap; with a Content-Length over the cap, it reads nothing at all.
    big = b'{"reward": 1.0, "trace": {"events": [{"x": "' + b"y" * 64 * MIB + b'"}]}}'
    answer = big if declared else Stream(total=64 * MIB)
    hostile = _hostile(**{"eel-0": answer})
    transport = CountingTransport()
    with thread_server(hostile.app()) as url:
        async with (
            httpx.AsyncClient(transport=transport) as http,
            _queue(tmp_path / "ws", url, Budget(), http=http, max_response_bytes=MIB) as queue,
        ):
            results = await queue.evaluate("c1", CANDIDATE, ["eel-0"])
    assert "body over 1 MiB: refused unread" in (results["eel-0"].record.error or "")
    assert transport.read <= (0 if declared else MIB + 64 * 1024)
    assert hostile.calls["eel-0"] == 1


async def test_a_huge_trace_is_kept_in_memory_as_it_is_stored(tmp_path: Path) -> None:
    # 3 MiB of random hex does not compress under a 64 KiB trace cap: the record the
    # caller holds carries the capped trace, the very one in the database, not 3 MiB.
    text = random.Random(1).randbytes(1_600_000).hex()
    body = json.dumps(
        {"reward": 1.0, "trace": {"messages": [{"role": "tool", "content": text}]}}
    ).encode()
    hostile = _hostile(**{"gnu-0": body})
    with thread_server(hostile.app()) as url:
        async with _queue(tmp_path / "ws", url, Budget(), trace_cap_bytes=64 * 1024) as queue:
            results = await queue.evaluate("c1", CANDIDATE, ["gnu-0", "gnu-1"])
            record = results["gnu-0"].record
            rows = await queue._workspace.rollouts_for_candidate(record.run_id, "c1")
    [stored] = [row for row in rows if row.seed == "gnu-0"]
    assert record.reward == 1.0 and record.trace_truncated
    assert record.trace == stored.trace
    assert record.trace["_truncated"]["original_bytes"] > 3 * MIB
    assert len(json.dumps(record.trace)) < MIB
    small = results["gnu-1"].record
    assert small.trace["messages"] and not small.trace_truncated


async def test_a_timeout_is_reported_as_a_timeout_with_its_value(tmp_path: Path) -> None:
    hostile = _hostile(**{"gnu-0": Slow(1.0)})
    request = RolloutRequest(candidate=CANDIDATE, seed="gnu-0")
    with thread_server(hostile.app()) as url:
        # An injected client with a long timeout of its own: --rollout-timeout still applies.
        async with httpx.AsyncClient(timeout=60.0) as http:
            policy = RetryPolicy(max_retries=1, base_delay_s=0.0, timeout_s=0.2)
            client = ContainerClient([url], http=http, policy=policy)
            with pytest.raises(RolloutFailed) as info:
                await client.rollout(request)
    failed = info.value
    assert (failed.reason, failed.timeout_s, failed.attempts) == ("timeout", 0.2, 2)
    assert "timed out: no answer within 0.2 s" in str(failed)
    assert "raise --rollout-timeout" in str(failed)
    assert "rate limits" not in str(failed)


async def test_the_error_gate_names_each_kind_of_failure_and_its_fix(tmp_path: Path) -> None:
    slow = {f"{label}-0": Slow(1.0) for label in ("fox", "gnu")}
    hostile = _hostile(**slow)
    seeds = ["ant-0", "bee-0", "fox-0", "gnu-0", "ant-1"]
    gate = ErrorGate(max_rate=0.25, min_attempts=4)
    policy = RetryPolicy(max_retries=0, base_delay_s=0.0, timeout_s=0.2)
    with thread_server(hostile.app()) as url:
        async with _queue(tmp_path / "ws", url, Budget(), gate=gate, policy=policy) as queue:
            with pytest.raises(ContainerError) as info:
                await queue.evaluate("c1", CANDIDATE, seeds)
    message = str(info.value)
    assert message.startswith("4 of 5 rollouts failed (over the 25% limit, --max-error-rate)")
    assert "2 timed out (raise --rollout-timeout" in message
    assert "no answer within 0.2 s" in message
    assert "2 answered 200 with a body that cannot be scored (fix what the container returns" in (
        message
    )
    assert "rate limits" not in message


async def test_one_nan_reward_does_not_fail_the_run(tmp_path: Path) -> None:
    # One train seed answers NaN, another more than --max-response-mib: two errored
    # rollouts per candidate scored there, and a run that completes and still improves.
    rules = RuleContainer(program(["ant", "bee", "cat", "cow"], train=3, holdout=2))
    answers: dict[str, Any] = {"bee-1": b'{"reward": NaN}', "cat-1": Stream(total=2 * MIB)}
    hostile = HostileContainer(rules, answers=answers)
    with thread_server(hostile.app()) as url:
        result = await run_optimization(
            RunConfig(
                containers=[url],
                reflection_model="scripted",
                max_metric_calls=200,
                minibatch_size=2,
                max_idle_iterations=3,
                use_merge=False,
                retry_base_delay_s=0.0,
                max_response_mib=1.0,
            ),
            workspace=tmp_path / "ws",
            proposer=ScriptedProposer(),
        )
    assert result.status == "completed"
    rollouts = result.evidence["rollouts"]
    assert rollouts["errors"] >= 2 and rollouts["retries"] == 0
    # Each bad answer was paid once and never retried.
    assert hostile.calls["bee-1"] + hostile.calls["cat-1"] == rollouts["errors"]
    assert hostile.calls["cat-1"] >= 1
    assert result.evidence["best"]["train"] > result.evidence["baseline"]["train"]
