"""A few rows that always fail do not end a run: such a seed is set aside after two candidates,
named, never scored, and counted once by the error gate; a container where most seeds fail
still stops at once."""

from __future__ import annotations

import json
import random
from collections import Counter
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
from optimizer.runtime.rollouts.seed_failures import SetAside
from optimizer.searches import run_optimization
from schemas import ContainerError, Event, Program, RolloutRecord, RunConfig
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from workspace import Workspace

SEEDS = [f"s{i}" for i in range(12)]
PROGRAM = Program.model_validate(
    {
        "program_id": "p",
        "fingerprint": "fp-1",
        "components": [{"name": "system_prompt", "text": "x"}],
        "seeds": {"train": SEEDS, "holdout": ["h"]},
    }
)


class Container:
    """Seeds in ``crashing`` answer 500 as an SDK container does when the agent raises on the
    row; seeds in ``down`` answer 503 (an infrastructure fault). Counts POSTs per seed."""

    def __init__(self, crashing: set[str] = frozenset(), down: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.crashing, self.down = set(crashing), set(down)
        self.calls: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        seed = json.loads(request.content)["seed"]
        self.calls[seed] += 1
        if seed in self.crashing:
            error = {"type": "KeyError", "message": f"'text' missing in row {seed}"}
            return httpx.Response(500, json={"error": error})
        if seed in self.down:
            return httpx.Response(503)
        return httpx.Response(200, json={"reward": 1.0, "feedback": "ok"})


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with Workspace(tmp_path / "ws") as workspace:
        yield workspace


async def _queue(
    ws: Workspace, container: Container, gate: ErrorGate, events: list[Event] | None = None
) -> RolloutQueue:
    run = await ws.create_run(RunConfig(containers=["http://c"]))
    sink = EventSink(ws, run.run_id)
    if events is not None:
        sink.subscribe(events.append)
    client = ContainerClient(
        ["http://c"],
        http=httpx.AsyncClient(transport=httpx.MockTransport(container)),
        policy=RetryPolicy(max_retries=1, base_delay_s=0.0),
        rng=random.Random(0),
    )
    return RolloutQueue(
        client=client,
        workspace=ws,
        run_id=run.run_id,
        program=PROGRAM,
        budget=Budget(max_calls=1000),
        events=sink,
        concurrency=3,
        error_gate=gate,
    )


def _candidate(n: int) -> dict[str, str]:
    return {"system_prompt": f"candidate {n}"}


async def test_two_rows_that_always_crash_are_set_aside_and_do_not_end_the_run(
    ws: Workspace,
) -> None:
    # The run: 12 train rows, 2 crash the agent on every call. Each new candidate's
    # minibatch asked them again and the repeats pushed the error rate over 25%.
    container, gate, events = Container(crashing={"s3", "s7"}), ErrorGate(max_rate=0.25), []
    async with await _queue(ws, container, gate, events) as queue:
        first = await queue.evaluate("c1", _candidate(1), SEEDS)
        for n in range(2, 7):
            results = await queue.evaluate(f"c{n}", _candidate(n), ["s3", "s7", "s0"])
            assert results["s0"].reward == 1.0
            assert results["s3"].reward is None and results["s7"].reward is None  # never 0
    assert first["s3"].reward is None and not first["s3"].set_aside
    assert results["s3"].set_aside and "set aside" in (results["s3"].record.error or "")
    # Asked for two different candidates (each with its one retry), then never again.
    assert container.calls["s3"] == container.calls["s7"] == 4
    assert set(gate.set_aside) == {"s3", "s7"}
    note = gate.set_aside["s3"]
    assert note.candidates == ("c1", "c2") and "'text' missing in row s3" in note.error
    aside = [e.data for e in events if e.type == "seed_set_aside"]
    assert [a["seed"] for a in aside] == ["s3", "s7"]
    assert aside[0]["candidates"] == ["c1", "c2"]
    assert gate.errors == 2  # two failing seeds, not four failed rollouts


async def test_the_same_candidate_again_or_an_infrastructure_fault_sets_no_seed_aside(
    ws: Workspace,
) -> None:
    container = Container(crashing={"s3"}, down={"s5"})
    gate = ErrorGate(max_rate=1.0)
    async with await _queue(ws, container, gate) as queue:
        for _ in range(3):  # one candidate, three times: it is the candidate, maybe
            await queue.evaluate("c1", _candidate(1), ["s3"])
        for n in (1, 2, 3):  # the container is down for s5: not the row's fault
            await queue.evaluate(f"c{n}", _candidate(n), ["s5"])
    assert gate.set_aside == {}
    assert container.calls["s3"] == 6 and container.calls["s5"] == 6
    assert gate.errors == 1 + 3  # s3 once; every infrastructure fault


async def test_a_container_where_most_seeds_fail_still_stops_at_once(ws: Workspace) -> None:
    container = Container(crashing={f"s{i}" for i in range(8)})
    async with await _queue(ws, container, ErrorGate(max_rate=0.25)) as queue:
        with pytest.raises(ContainerError) as info:
            await queue.evaluate("c1", _candidate(1), SEEDS)
    message = str(info.value)
    assert message.startswith("8 of 12 rollouts failed (over the 25% limit, --max-error-rate)")
    assert "'text' missing in row" in message


def _failed(seed: str, candidate: str) -> RolloutRecord:
    return RolloutRecord(
        cache_key=f"{candidate}/{seed}",
        run_id="r",
        candidate_id=candidate,
        candidate_hash=f"hash-{candidate}",
        fingerprint="fp",
        seed=seed,
        policy="p",
        status="error",
        error=f"rollout of seed {seed!r} failed after 2 attempts: HTTP 500: boom",
    )


def _ok(seed: str, candidate: str) -> RolloutRecord:
    return _failed(seed, candidate).model_copy(
        update={"status": "ok", "reward": 1.0, "error": None}
    )


def test_seeds_set_aside_past_the_limit_stop_the_run_and_say_why() -> None:
    # A container that starts crashing on every row mid-run (its key expired): every seed
    # ends up set aside, which the rollout count alone (many good rollouts before) would miss.
    gate = ErrorGate(max_rate=0.25, seeds=8)
    for n in range(10):
        for seed in ("a", "b", "c", "d", "e", "f", "g", "h"):
            gate.observe(_ok(seed, f"old{n}"))
    for candidate in ("c1", "c2"):
        gate.observe(_failed("a", candidate), "status")
        gate.observe(_failed("b", candidate), "status")
    gate.check()  # 2 of 8 seeds set aside: 25%, not over it
    for candidate in ("c1", "c2"):
        gate.observe(_failed("c", candidate), "status")
    with pytest.raises(ContainerError) as info:
        gate.check()
    assert str(info.value).startswith(
        "3 of 8 seeds failed for 2 different candidates each and were set aside "
        "(over the 25% limit, --max-error-rate)"
    )


def test_the_gate_resumes_where_it_stopped() -> None:
    gate = ErrorGate(max_rate=0.25)
    gate.observe(_failed("a", "c1"), "status")
    gate.observe(_failed("a", "c2"), "timeout")
    gate.observe(_failed("b", "c1"), "invalid")
    again = ErrorGate(max_rate=0.25)
    again.restore(json.loads(json.dumps(gate.snapshot())))
    assert again.set_aside == {"a": gate.set_aside["a"]}
    assert isinstance(again.set_aside["a"], SetAside)
    assert again.observe(_failed("b", "c2"), "invalid") is not None  # its second candidate
    assert again.errors == 2


async def test_a_run_names_the_seeds_it_set_aside_and_never_scores_them(tmp_path: Path) -> None:
    rules = RuleContainer(program(["ant", "bee", "cat", "cow"], train=3, holdout=2))
    crashing = {"bee-1", "cat-3"}  # a train seed and a holdout seed
    calls: Counter[tuple[str, str]] = Counter()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rollout":
            body = json.loads(request.content)
            calls[(body["candidate"]["system_prompt"], body["seed"])] += 1
            if body["seed"] in crashing:
                return httpx.Response(500, json={"error": {"type": "KeyError", "message": "x"}})
        return rules(request)

    events: list[Event] = []
    config = RunConfig(
        containers=["http://rules"],
        reflection_model="scripted",
        max_metric_calls=300,
        minibatch_size=3,
        max_idle_iterations=3,
        use_merge=False,
        retry_base_delay_s=0.0,
        max_retries=1,
        proposals_in_flight=1,
    )
    proposer = ScriptedProposer()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        result = await run_optimization(
            config, workspace=tmp_path / "ws", proposer=proposer, http=http,
            on_event=events.append,
        )  # fmt: skip
    assert result.status == "completed"
    # Once aside, a seed is in no minibatch and shown to no proposal as a failure.
    aside = next(i for i, e in enumerate(events) if e.type == "seed_set_aside")
    later = [e.data.get("minibatch", []) for e in events[aside:] if e.type == "iteration"]
    assert later and not any(events[aside].data["seed"] in mb for mb in later)
    shown = [e for r in proposer.seen for e in (*r.evaluations, *r.train_evaluations)]
    assert shown and not any("set aside" in e.feedback for e in shown)
    packet: dict[str, Any] = result.evidence
    named = {a["seed"]: a for a in packet["set_aside"]}
    assert set(named) == {"bee-1", "cat-3"}
    for seed, note in named.items():
        assert len(note["candidates"]) == 2
        # never asked for a third candidate (each ask is one try and one retry)
        prompts = {prompt for prompt, s in calls if s == seed}
        assert len(prompts) == 2 and sum(calls[(p, seed)] for p in prompts) == 4
    assert [e.data["seed"] for e in events if e.type == "seed_set_aside"] == sorted(
        named, key=[e.data["seed"] for e in events if e.type == "seed_set_aside"].index
    )
    warnings = [e.data["message"] for e in events if e.type == "warning"]
    assert any("bee-1" in w and "set aside" in w for w in warnings)
    # Never scored: in no table, and every mean is over the seeds that remain.
    assert packet["per_seed"]["train"]["bee-1"] == {"baseline": None, "best": None}
    assert packet["per_seed"]["holdout"]["cat-3"] == {"baseline": None, "best": None}
    assert "bee-1" not in packet["frontier"]["train_seeds"]
    assert packet["best"]["train"] == 1.0  # the 11 train seeds that remain
    report = (result.evidence_dir / "report.md").read_text()
    assert "## Seeds set aside" in report and "bee-1" in report and "cat-3" in report


async def test_a_resumed_run_keeps_the_seeds_it_set_aside(tmp_path: Path) -> None:
    # What the checkpoint of an earlier execution says: bee-1 failed for two candidates.
    rules = RuleContainer(program(["ant", "bee", "cat"], train=3, holdout=2))
    note = SetAside("bee-1", ("old1", "old2"), "status", "HTTP 500: KeyError")
    checkpoint = {
        "failed": {"bee-1": {"hash1": "old1", "hash2": "old2"}},
        "aside": [note.as_dict()],
        "repeats": 1,
    }
    config = RunConfig(
        containers=["http://rules"],
        reflection_model="scripted",
        max_metric_calls=200,
        minibatch_size=3,
        max_idle_iterations=3,
        use_merge=False,
        proposals_in_flight=1,
    )
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.create_run(config)
        await ws.update_run(run.run_id, state={"seed_failures": checkpoint})
        async with rules.client() as http:
            result = await run_optimization(
                workspace=ws, run_id=run.run_id, proposer=ScriptedProposer(), http=http
            )
        stored = (await ws.get_run(run.run_id)).state["seed_failures"]
    assert result.status == "completed"
    assert not [seed for _, seed in rules.calls if seed == "bee-1"]  # never asked again
    assert [n["seed"] for n in result.evidence["set_aside"]] == ["bee-1"]
    assert result.evidence["best"]["train"] == 1.0  # full marks on the 8 seeds that remain
    assert stored["aside"] == [note.as_dict()]  # and the next resume knows it too
