"""Whole runs of the GEPA search in-process, for the tests of its parts that need one.

A rule container (``tests/fakes/scripted.py``) behind ``httpx.MockTransport`` and a scripted
proposer make every run deterministic; the queue, cache, budget, frontier, workspace and
evidence packet are the real ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from optimizer.runtime.lifecycle.run import RunResult
from optimizer.searches import run_optimization
from proposer import ProposalRequest
from schemas import Event, RunConfig
from tests.fakes.scripted import BASELINE, SEARCH_SETTINGS, RuleContainer, ScriptedProposer, program

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]


async def whole_run(
    tmp_path: Path,
    container: RuleContainer,
    proposer: ScriptedProposer,
    events: list[Event] | None = None,
    on_event: Any = None,
    **config: Any,
) -> RunResult:
    """A whole run against ``container``, with the search settings of these tests and ``config``
    over them; each event is appended to ``events`` and given to ``on_event``."""
    settings: dict[str, Any] = {**SEARCH_SETTINGS, "seed": 0, **config}

    def listen(event: Event) -> None:
        if events is not None:
            events.append(event)
        if on_event is not None:
            on_event(event)

    async with container.client() as http:
        return await run_optimization(
            RunConfig(**settings),
            workspace=tmp_path / "ws",
            proposer=proposer,
            http=http,
            on_event=listen,
        )


def release_when_both_asked(proposer: ScriptedProposer) -> asyncio.Task[None]:
    """Hold the first two proposals until both are asked: they are written at the same time."""
    first, second = proposer.hold(1), proposer.hold(2)

    async def release() -> None:
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.01)
        first.set()
        second.set()

    return asyncio.create_task(release())


async def on_the_baseline(
    tmp_path: Path,
    container: RuleContainer,
    delays: tuple[float, ...],
    pick: Callable[[list[str], int], str] = lambda labels, n: labels[min(n - 1, len(labels) - 1)],
    config: dict[str, Any] | None = None,
    **proposer_options: Any,
) -> list[Event]:
    """A run with three proposals (one per delay) in flight on the baseline, each adding
    another label (``pick``); the n-th answers ``delays[n]`` seconds after the one before it
    (the first, after all were asked). ``proposer_options`` go to the ``ScriptedProposer``,
    ``config`` to the run."""
    proposer = ScriptedProposer(pick=pick, **proposer_options)
    holds = [proposer.hold(n) for n in range(1, len(delays) + 1)]

    async def release() -> None:
        while len(proposer.seen) < len(delays):
            await asyncio.sleep(0.001)
        for hold, delay in zip(holds, delays, strict=True):
            await asyncio.sleep(delay)
            hold.set()

    releaser = asyncio.create_task(release())
    events: list[Event] = []
    await whole_run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=len(delays),
        minibatch_size=2 * len(LABELS),
        max_idle_iterations=2,
        **(config or {}),
    )
    await releaser
    return events


def with_ant(labels: list[str]) -> dict[str, Any]:
    """The rules program with a baseline that already lists ``ant``."""
    spec = program(labels)
    spec["components"][0]["text"] += "\n- ant"
    return spec


async def junk_child(
    tmp_path: Path,
    labels: list[str],
    slipping: set[str],
    junk_at: int,
    release: Callable[[ScriptedProposer, list[Event]], Coroutine[Any, Any, None]],
    **config: Any,
) -> tuple[RunResult, ScriptedProposer, str, str]:
    """A run on a baseline stating every label, whose noisy student slips on ``slipping``.
    The ``junk_at``-th answer adds a junk line, whose student slips on every seed but those
    of that proposal's minibatch: the junk child passes its gate, scores below the baseline
    on train and joins the frontier. Every other answer changes nothing. ``release`` lets
    the answers held go. Returns the run, the proposer, the baseline and the junk child."""
    prog = program(labels)
    prog["components"][0]["text"] = "\n".join([BASELINE, *(f"- {x}" for x in labels)])
    proposer = ScriptedProposer()

    def slips(prompt: str, seed: str) -> bool:
        if "- zzz" not in prompt:
            return seed in slipping
        return seed not in {e.seed for e in proposer.seen[junk_at - 1].evaluations}

    def answer(request: ProposalRequest, n: int) -> str | None:
        text = request.parent.components["system_prompt"]
        return f"{text}\n- zzz" if n == junk_at else None

    proposer.script = answer
    events: list[Event] = []
    releaser = asyncio.create_task(release(proposer, events))
    result = await whole_run(
        tmp_path,
        RuleContainer(prog, slips=slips),
        proposer,
        events,
        patience=0,
        max_idle_iterations=50,
        **config,
    )
    await asyncio.wait_for(releaser, 5)
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    baseline, junk = list(train)[:2]
    assert train[junk] < train[baseline]
    return result, proposer, baseline, junk


async def drops_bee(
    tmp_path: Path, labels: list[str], answer: Callable[[ProposalRequest, int], str | None]
) -> tuple[RunResult, ScriptedProposer, list[Event], dict[str, float]]:
    """One writer on a baseline listing ant, bee and cat, whose noisy student slips on ant-1
    and cat-1 while the bee line is there: a child that drops it trades those slips for
    bee's seeds and ties the baseline on train. Returns the run, the proposer, the events
    and the train means by candidate (the baseline first)."""
    prog = program(labels)
    prog["components"][0]["text"] = "\n".join([BASELINE, "- ant", "- bee", "- cat"])

    def slips(prompt: str, seed: str) -> bool:
        return "- bee" in prompt and seed in {"ant-1", "cat-1"}

    proposer = ScriptedProposer(script=answer)
    events: list[Event] = []
    result = await whole_run(
        tmp_path,
        RuleContainer(prog, slips=slips),
        proposer,
        events,
        proposals_in_flight=1,
        patience=0,
        max_idle_iterations=50,
    )
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    return result, proposer, events, train


def without_bee(request: ProposalRequest) -> str:
    """The parent's text without its bee line (an answer that drops a rule)."""
    return request.parent.components["system_prompt"].replace("\n- bee", "")
