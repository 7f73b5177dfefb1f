"""The GEPA search end to end in-process: rebasing, evidence, budget use, honest promotion.

A rule container (``tests/fakes/scripted.py``) behind ``httpx.MockTransport`` and a scripted
proposer make every run deterministic; the queue, cache, budget, frontier, workspace and
evidence packet are the real ones.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from optimizer.gepa.gate import MAX_REGATES
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.strategies import strategies_for
from optimizer.gepa.strategies.batch_sampler import CONTEXT_PER_MINIBATCH
from optimizer.gepa.strategies.stop_condition import CONVERGED, NOTHING_TO_FIX
from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.lifecycle.run import RunResult
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from optimizer.searches import run_optimization
from proposer import ComponentSpec, ProposalRequest
from schemas import (
    CandidateRecord,
    Event,
    ProposalRejected,
    RunConfig,
    candidate_id_for,
    content_hash,
)
from tests.fakes.scripted import (
    BASELINE,
    FEEDBACK,
    SEARCH_SETTINGS,
    RuleContainer,
    ScriptedProposer,
    program,
)
from workspace import Workspace

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]


async def _run(
    tmp_path: Path,
    container: RuleContainer,
    proposer: ScriptedProposer,
    events: list[Event] | None = None,
    on_event: Any = None,
    **config: Any,
) -> RunResult:
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


def _release_when_both_asked(proposer: ScriptedProposer) -> asyncio.Task[None]:
    """Hold the first two proposals until both are asked: they are written at the same time."""
    first, second = proposer.hold(1), proposer.hold(2)

    async def release() -> None:
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.01)
        first.set()
        second.set()

    return asyncio.create_task(release())


async def test_sequential_run_shows_the_parents_train_failures_and_pays_no_rollout_twice(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await _run(tmp_path, container, proposer, proposals_in_flight=1)
    assert result.promoted
    assert max(container.calls.values()) == 1  # no (content, seed) reached the container twice
    first = proposer.seen[0]
    minibatch = {e.seed for e in first.evaluations}
    context = {e.seed for e in first.train_evaluations}
    # Other failures from the baseline's cached train evaluation (no rollout paid), bounded so
    # that the gate can extend onto every one of them.
    assert context and not context & minibatch
    assert len(context) == CONTEXT_PER_MINIBATCH * len(minibatch)
    assert all(e.reward == 0.0 and "expected" in e.feedback for e in first.train_evaluations)


async def test_a_fix_of_a_failure_shown_outside_the_minibatch_passes_on_the_extended_gate(
    tmp_path: Path,
) -> None:
    # The proposer fixes a label it saw only among the other train failures: the child ties
    # its parent on the minibatch, so the gate scores both on those failures too.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer(from_context=True)
    events: list[Event] = []
    result = await _run(tmp_path, container, proposer, events, proposals_in_flight=1)
    first = next(e.data for e in events if e.type == "gate")
    assert first["accepted"] and len(first["minibatch"]) > 2
    assert first["child_score"] > first["parent_score"]
    assert result.promoted
    assert max(container.calls.values()) == 1  # the gate's rollouts were reused on train


async def test_a_fix_that_slips_on_a_seed_its_parent_passed_is_scored_on_the_extension(
    tmp_path: Path,
) -> None:
    # The baseline knows ant and bee. The first child adds the label of the failure it was
    # shown and fixes it, but its noisy student slips on the seed the parent passed in the
    # same minibatch: one seed gained, one lost, the totals level. That is no sign of worse:
    # both are scored on the other failures it was shown, where the fix shows.
    prog = program(LABELS)
    prog["components"][0]["text"] = "\n".join([BASELINE, "- ant", "- bee"])
    slipped: set[str] = set()

    def slips(prompt: str, seed: str) -> bool:
        if prompt.count("\n- ") < 3 or slipped or not seed.startswith(("ant", "bee")):
            return False
        slipped.add(seed)  # the first child's first passed seed, once
        return True

    container, proposer = RuleContainer(prog, slips=slips), ScriptedProposer()
    events: list[Event] = []
    await _run(tmp_path, container, proposer, events, proposals_in_flight=1, concurrency=2)
    first = next(e.data for e in events if e.type == "gate")
    assert slipped and slipped <= set(first["minibatch"][:2])  # it slipped in the minibatch
    assert len(first["minibatch"]) > 2  # levelled there, so it was extended
    assert first["accepted"] and first["child_score"] > first["parent_score"]


async def test_a_child_that_fixes_nothing_is_rejected_after_every_seed_it_was_shown(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer(fixed_label="zzz")
    events: list[Event] = []
    await _run(tmp_path, container, proposer, events, proposals_in_flight=1)
    gates = [e.data for e in events if e.type == "gate"]
    assert gates and not any(g["accepted"] for g in gates)
    shown = {e.seed for e in proposer.seen[0].evaluations + proposer.seen[0].train_evaluations}
    assert set(gates[0]["minibatch"]) == shown  # extended onto every failure it was shown
    child = gates[0]["candidate_id"]
    # The same text written again is gated again (a new minibatch) a bounded number of times,
    # then refused as a duplicate; the seeds it already ran on are never paid for twice.
    regates = [e.data for e in events if e.type == "regate"]
    assert len(regates) == MAX_REGATES and all(r["candidate_id"] == child for r in regates)
    rejected = [e.data["reason"] for e in events if e.type == "proposal_rejected"]
    assert rejected and set(rejected) == {"duplicate"}
    assert max(container.calls.values()) == 1


async def test_proposals_in_flight_at_once_are_shown_different_failures(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    watcher = _release_when_both_asked(proposer)
    await _run(tmp_path, container, proposer, proposals_in_flight=2)
    await asyncio.wait_for(watcher, 5)
    a, b = (
        {e.seed for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:2]
    )
    # Twelve failing seeds are enough for two disjoint views: no failure is shown twice.
    assert a and b and not a & b


async def test_the_search_stops_once_a_candidate_is_perfect_on_train(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await _run(
        tmp_path, container, proposer, proposals_in_flight=1, max_idle_iterations=50
    )
    assert "full marks on every train seed" in result.evidence["stop_reason"]
    assert result.evidence["best"]["train"] == 1.0
    assert result.evidence["rollouts"]["paid"] < 400  # budget left: nothing to improve


async def test_a_stale_proposal_is_rebased_onto_the_new_best(tmp_path: Path) -> None:
    # The whole train split is the minibatch, so both first proposals see every failure; the
    # second adds another label than the first and is held until the first one is the best.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(pick=lambda labels, n: labels[min(n - 1, len(labels) - 1)])
    release = proposer.hold(2)
    events: list[Event] = []

    def on_event(event: Event) -> None:
        best = (event.data.get("best") or {}).get("candidate_id")
        if (
            event.type == "frontier"
            and best
            and len(event.data["winners"])
            and not release.is_set()
        ):
            release.set()

    await _run(
        tmp_path,
        container,
        proposer,
        events,
        on_event,
        proposals_in_flight=2,
        minibatch_size=2 * len(LABELS),
        max_idle_iterations=2,
    )
    rebases = [e.data for e in events if e.type == "rebase"]
    assert rebases and rebases[0]["applied"] is True
    stale_child = rebases[0]["candidate_id"]
    # The rebased text may be rebased again when yet another child won meanwhile.
    chain = [r for r in rebases if r["iteration"] == rebases[0]["iteration"] and r["applied"]]
    final, onto = chain[-1]["rebased"], chain[-1]["onto"]
    candidates = {e.data["candidate_id"]: e.data for e in events if e.type == "candidate"}
    assert candidates[final]["origin"] == "merge" and candidates[final]["parents"][0] == onto
    # The stale child itself was never gated against its superseded parent, nor scored on train.
    gates = {e.data["candidate_id"]: e.data for e in events if e.type == "gate"}
    assert stale_child not in gates
    assert gates[final]["parent"] == onto and gates[final]["accepted"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert stale_child not in train
    assert train[final] > train[onto]  # both edits: better than the best it was rebased on
    async with Workspace(tmp_path / "ws", readonly=True) as ws:
        run = (await ws.list_runs())[0]
        stored = {c.candidate_id: c for c in await ws.list_candidates(run.run_id)}
    lines = set(stored[final].components["system_prompt"].splitlines())
    assert set(stored[onto].components["system_prompt"].splitlines()) < lines
    assert set(stored[stale_child].components["system_prompt"].splitlines()) < lines


@pytest.mark.parametrize("in_flight", [1, 4])
@pytest.mark.parametrize("budget", [55, 66, 78, 90])
async def test_a_run_stopped_by_its_budget_spends_it(
    tmp_path: Path, budget: int, in_flight: int
) -> None:
    # Eight labels: no budget here lets the search fix them all and stop on full marks.
    labels = [*LABELS, "fox", "gnu"]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    result = await _run(
        tmp_path, container, proposer, max_metric_calls=budget, proposals_in_flight=in_flight
    )
    packet = result.evidence
    assert "budget" in packet["stop_reason"]
    assert 0.95 * budget <= packet["rollouts"]["paid"] <= budget
    assert sum(container.calls.values()) == packet["rollouts"]["paid"]


async def test_the_last_candidate_is_scored_on_the_train_seeds_the_budget_has_left(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    events: list[Event] = []
    result = await _run(
        tmp_path, container, proposer, events, max_metric_calls=55, proposals_in_flight=1
    )
    partial = [e.data for e in events if e.type == "scored" and e.data["split"] == "train_partial"]
    assert partial and partial[0]["seeds"] < partial[0]["of"]
    assert "scored on" in result.evidence["stop_reason"]
    assert result.evidence["rollouts"]["paid"] == 55
    assert result.promoted


async def test_no_reflection_is_asked_when_the_budget_left_is_only_a_gate(tmp_path: Path) -> None:
    # With 82 calls and eight labels, two children are scored on every train seed and the
    # search has 2 calls left: a third child's minibatch of 2 would take them all, leaving
    # nothing to score it on train. Its reflection is not asked.
    labels = [*LABELS, "fox", "gnu"]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    events: list[Event] = []
    result = await _run(
        tmp_path, container, proposer, events, max_metric_calls=82, proposals_in_flight=1
    )
    assert (
        "2 left for search, no more than a new child's gate of 2"
        in (result.evidence["stop_reason"])
    )
    children = [e.data["candidate_id"] for e in events if e.type == "candidate"]
    trained = {e.data["candidate_id"] for e in events if e.type == "scored"}
    assert len(proposer.seen) == len(children) == 2
    assert set(children) <= trained
    assert result.evidence["rollouts"]["paid"] == 80


async def test_the_search_stops_when_the_winner_is_settled_and_no_hopeless_child_is_written(
    tmp_path: Path,
) -> None:
    # At 78 calls the last child could be scored on 6 of 12 train seeds: even with full marks
    # there and nothing elsewhere it could not beat the best's mean, so the winner is settled.
    # Its holdout rollouts start at once, and the search stops: that child is never written
    # (its reflection and its rollouts could not change the winner).
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    events: list[Event] = []
    result = await _run(
        tmp_path, container, proposer, events, max_metric_calls=78, proposals_in_flight=1
    )
    settled = [e.data["candidate_id"] for e in events if e.type == "settled"]
    assert settled == [result.best_candidate_id] != [result.baseline_candidate_id]
    at = next(i for i, e in enumerate(events) if e.type == "settled")
    assert not [e for e in events[at:] if e.type in ("iteration", "candidate")]
    assert not [e for e in events if e.type == "scored" and e.data["split"] == "train_partial"]
    assert "too few to beat" in result.evidence["stop_reason"]
    holdout = set(program(LABELS)["seeds"]["holdout"])
    measured = {
        t["seed"]
        for e in events
        if e.type == "trials"
        for t in e.data["trials"]
        if t["candidate_id"] == result.best_candidate_id
    }
    assert holdout <= measured
    assert result.evidence["rollouts"]["paid"] < 78 and result.promoted
    assert result.evidence["promotion"]["measured_seeds"] == len(holdout)


async def test_a_budget_of_two_completes_and_says_what_it_skipped(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await _run(tmp_path, container, proposer, max_metric_calls=2)
    packet = result.evidence
    assert packet["rollouts"]["paid"] == 2 and sum(container.calls.values()) == 2
    skipped = " ".join(packet["plan"]["skipped"])
    assert "no search" in skipped and "1 of 12 train seeds" in skipped
    assert "1 of 12 holdout seeds" in skipped
    assert not result.promoted
    # The reflection model was still asked once (a smoke test reaches every part).
    assert len(proposer.seen) == 1
    assert "smoke proposal" in packet["stop_reason"]
    report = (result.evidence_dir / "report.md").read_text()
    assert "What this budget skipped" in report and "no search" in report


@pytest.mark.parametrize("val", [0, 1])
async def test_the_seeds_that_choose_the_winner_never_measure_its_lift(
    tmp_path: Path, val: int
) -> None:
    container = RuleContainer(program(LABELS, val=val))
    result = await _run(tmp_path, container, ScriptedProposer(), holdout_top_k=2)
    promotion = result.evidence["promotion"]
    assert promotion["selection_split"] == ("val" if val else "train")
    assert promotion["measured_on"] == "holdout"
    holdout = {s for s in program(LABELS, val=val)["seeds"]["holdout"]}
    measured = {h for h, seed in container.calls if seed in holdout}
    # Only the winner and the baseline ever ran on holdout seeds.
    assert measured == {
        _hash(result, result.best_candidate_id),
        _hash(result, result.baseline_candidate_id),
    }
    assert promotion["holdout_seeds"] == len(holdout) == promotion["n"]
    report = (result.evidence_dir / "report.md").read_text()
    assert "chose the winner" in report and "never used to choose" in report


def _hash(result: RunResult, candidate_id: str) -> str:
    for c in result.evidence["candidates"]:
        if c["candidate_id"] == candidate_id:
            break
    packet = json.loads((result.evidence_dir / "evidence.json").read_text())
    components = (
        packet["best"]["components"]
        if candidate_id == packet["best"]["candidate_id"]
        else packet["baseline"]["components"]
    )
    return content_hash(components)


async def test_merges_pair_branches_only_and_a_tie_is_not_accepted(tmp_path: Path) -> None:
    # Parallel children rewrite the same first line, so rebasing them conflicts and sibling
    # branches stay on the frontier; merges then combine branches, never a line with itself.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(
        pick=lambda labels, n: labels[(n - 1) % len(labels)], conflicting=True
    )
    events: list[Event] = []
    await _run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=3,
        minibatch_size=2 * len(LABELS),
        use_merge=True,
        max_idle_iterations=3,
    )
    rebases = [e.data for e in events if e.type == "rebase"]
    assert any(r.get("reason") == "conflict" for r in rebases)
    merges = [e.data["merge"] for e in events if e.type == "iteration" and "merge" in e.data]
    assert merges and proposer.merges
    parents = {e.data["candidate_id"]: e.data["parents"] for e in events if e.type == "candidate"}

    def ancestors(cid: str) -> set[str]:
        out, todo = set(), list(parents.get(cid, []))
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo += parents.get(p, [])
        return out

    for a, b in merges:
        assert a not in ancestors(b) and b not in ancestors(a)
    merged = {cid for cid, ps in parents.items() if len(ps) == 2}
    gates = [e.data for e in events if e.type == "gate" and e.data["candidate_id"] in merged]
    assert gates
    for gate in gates:
        # A merge must beat its best parent strictly to be scored on train.
        assert gate["accepted"] == (gate["child_score"] > gate["parent_score"])


async def test_a_clean_text_merge_on_the_common_ancestor_needs_no_reflection_call(
    tmp_path: Path,
) -> None:
    base = {"system_prompt": "Answer with the label."}
    a = {"system_prompt": "Answer with the label.\n- ant"}
    b = {"system_prompt": "Answer with the label.\n- bee"}
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.create_run(RunConfig(containers=["http://rules"]))
        state = SearchState(train_seeds=("ant-0", "bee-0"))
        records = {}
        for name, comps, parent in (("base", base, []), ("a", a, ["x"]), ("b", b, ["x"])):
            cid = candidate_id_for(comps)
            parent_ids = [records["base"].candidate_id] if parent else []
            records[name] = CandidateRecord(
                run_id=run.run_id,
                candidate_id=cid,
                content_hash=content_hash(comps),
                components=comps,
                parents=parent_ids,
                origin="mutation" if parent else "seed",
            )
            state.add(records[name])
        proposer = ScriptedProposer()

        async def checkpoint() -> None:
            return None

        deps = SearchDeps(
            config=RunConfig(containers=["http://rules"]),
            run_id=run.run_id,
            workspace=ws,
            queue=None,  # type: ignore[arg-type]  # a text merge sends no rollout
            proposer=proposer,
            budget=Budget(),
            events=EventSink(ws, run.run_id),
            rng=random.Random(0),
            state=state,
            components=(ComponentSpec("system_prompt", "prompt"),),
            description="",
            checkpoint=checkpoint,
            proposer_cost=lambda: 0.0,
        )
        search = GepaSearch(deps, strategies_for(deps))
        merged = await search.merging.text_merge(1, records["a"], records["b"])
    assert merged is not None and proposer.merges == [] and proposer.seen == []
    assert merged.components["system_prompt"] == "Answer with the label.\n- ant\n- bee"
    assert merged.parents == [records["a"].candidate_id, records["b"].candidate_id]
    assert merged.origin == "merge" and "no reflection call" in merged.rationale


async def test_a_sideways_child_is_built_on_next_shown_the_seeds_it_broke(tmp_path: Path) -> None:
    # ant and bee are look-alikes: with both lines the items of the one listed first get the
    # other's label until a line tells them apart. Adding bee to a prompt with ant fixes bee's
    # seeds and breaks ant's: no better on the mean, but the step the fix needs.
    container = RuleContainer(
        program(["ant", "bee", "cat", "cow"]), rivals={"ant": "bee", "bee": "ant"}
    )
    events: list[Event] = []
    result = await _run(
        tmp_path, container, ScriptedProposer(), events, proposals_in_flight=1, seed=3
    )
    parents, train, sideways = {}, {}, []
    for i, e in enumerate(events):
        if e.type == "gate" and e.data["accepted"]:
            parents[e.data["candidate_id"]] = e.data["parent"]
        if e.type == "scored" and e.data["split"] == "train":
            cid = e.data["candidate_id"]
            train[cid] = e.data["mean"]
            if cid in parents and train[cid] <= train[parents[cid]]:
                sideways.append((i, cid))
    assert sideways
    for i, cid in sideways:
        follow = next(e.data for e in events[i:] if e.type == "iteration")
        assert follow["parent"] == cid
        assert follow["minibatch"][0].startswith("ant-")  # a seed the child broke comes first
    assert result.promoted and max(train.values()) == 1.0  # the line telling them apart


async def test_children_waiting_for_the_same_best_are_stacked_gated_and_scored_once(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline, each adding another label, come back at once.
    container = RuleContainer(program(LABELS))
    events = await _on_the_baseline(tmp_path, container, delays=(0.0, 0.0, 0.0))
    stacks = [e.data for e in events if e.type == "stack"]
    assert stacks and len(stacks[0]["children"]) >= 2
    stack = stacks[0]
    gates = [e.data for e in events if e.type == "gate"]
    gated = [g["candidate_id"] for g in gates]
    # The stacked children were never gated or scored one by one; the stack was, once each.
    assert not set(stack["children"]) & set(gated)
    assert gated.count(stack["candidate_id"]) == 1
    assert next(g for g in gates if g["candidate_id"] == stack["candidate_id"])["accepted"]
    # It is judged on every train seed at once (no minibatch gate, no extension rounds).
    stack_gate = next(g for g in gates if g["candidate_id"] == stack["candidate_id"])
    assert sorted(stack_gate["minibatch"]) == sorted(program(LABELS)["seeds"]["train"])
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert not set(stack["children"]) & set(train)
    # Each stacked child adds one label to the best it was stacked on.
    onto = train[stack["onto"]]
    assert train[stack["candidate_id"]] == pytest.approx(
        onto + len(stack["children"]) / len(LABELS)
    )
    assert max(container.calls.values()) == 1


async def test_a_child_waits_for_siblings_asked_with_it_so_all_are_stacked_at_once(
    tmp_path: Path,
) -> None:
    # Three proposals asked at once answer some seconds later, the first 0.1 s before the
    # others (as parallel calls to a hosted model do): the first must not be gated alone.
    # It waits a quarter of its 4 s writing time (1 s) for them, so a loaded machine has 0.9 s
    # to deliver the 0.1 s (with a 1 s writing time the margin was 0.15 s).
    events = await _on_the_baseline(
        tmp_path, RuleContainer(program(LABELS)), delays=(4.0, 0.1, 0.0)
    )
    children = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    stacks = [e.data for e in events if e.type == "stack"]
    assert stacks and sorted(stacks[0]["children"]) == sorted(children)
    gated = [e.data["candidate_id"] for e in events if e.type == "gate"]
    assert not set(children) & set(gated)


async def _on_the_baseline(
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
    await _run(
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


async def test_two_answers_with_the_same_text_make_one_candidate_and_one_duplicate(
    tmp_path: Path,
) -> None:
    # Two proposals on the baseline answer at the same moment with the same text. The first
    # is stored; the second is the duplicate of a proposal written at the same time, however
    # the two answers interleave while the first is being stored (they used to be stored
    # twice as one candidate, or not, by timing, and the second's failures counted as
    # answered or as found barren accordingly).
    def same(request: ProposalRequest, n: int) -> str | None:
        text = request.parent.components["system_prompt"]
        return f"{text}\n- ant" if n <= 2 else None

    proposer = ScriptedProposer(script=same)
    releaser = _release_when_both_asked(proposer)
    events: list[Event] = []
    await _run(
        tmp_path,
        RuleContainer(program(LABELS)),
        proposer,
        events,
        proposals_in_flight=2,
        patience=0,
        max_idle_iterations=4,
    )
    await asyncio.wait_for(releaser, 5)
    made = [
        e.data["iteration"] for e in events if e.type == "candidate" and e.data["iteration"] <= 2
    ]
    twins = [
        e.data["iteration"]
        for e in events
        if e.type == "proposal_rejected" and e.data["reason"] == "duplicate"
    ]
    assert len(made) == 1 and twins == [3 - made[0]]


async def test_proposals_in_flight_are_shown_different_kinds_of_failure(tmp_path: Path) -> None:
    # Two train seeds per label fail with the same feedback ("expected <label>"): one fix
    # repairs both. Siblings shown different seeds of one label would write one fix twice.
    labels = [f"{name}{i}" for name in ("ant", "bee", "cat") for i in range(4)]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    watcher = _release_when_both_asked(proposer)
    await _run(tmp_path, container, proposer, proposals_in_flight=2, max_metric_calls=150)
    await asyncio.wait_for(watcher, 5)
    a, b = (
        {e.feedback for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:2]
    )
    assert len(a) >= 3 and len(b) >= 3
    assert not a & b  # 12 kinds of failure are enough for two disjoint views


def _with_ant(labels: list[str]) -> dict[str, Any]:
    """The rules program with a baseline that already lists ``ant``."""
    spec = program(labels)
    spec["components"][0]["text"] += "\n- ant"
    return spec


async def _two_on_ant(
    tmp_path: Path, container: RuleContainer, lines: tuple[str, str]
) -> list[Event]:
    """Two proposals on the ``- ant`` baseline, answered together, adding ``lines``; later
    proposals add the first label of the failures they are shown."""
    return await _on_the_baseline(
        tmp_path,
        container,
        delays=(1.0, 0.0),
        pick=lambda labels, n: lines[n - 1] if n <= len(lines) else labels[0],
    )


async def test_a_stack_worse_than_its_base_leaves_each_child_to_its_own_gate(
    tmp_path: Path,
) -> None:
    # Two children written at once: one adds a label, the other a line that breaks every
    # item. Their stack is worse than the baseline on train; each child alone is then gated,
    # and only the good one is accepted.
    events = await _two_on_ant(
        tmp_path, RuleContainer(_with_ant(LABELS), poison="poison"), ("cat", "poison")
    )
    stack = next(e.data for e in events if e.type == "stack")
    gates = {e.data["candidate_id"]: e.data for e in events if e.type == "gate"}
    assert not gates[stack["candidate_id"]]["accepted"]
    assert (
        gates[stack["candidate_id"]]["child_score"] < gates[stack["candidate_id"]]["parent_score"]
    )
    good, bad = stack["children"]
    assert gates[good]["accepted"]
    # The bad edit replayed on the new best is the stack's text again, known to be worse.
    assert bad not in gates or not gates[bad]["accepted"]
    scored = [e.data["candidate_id"] for e in events if e.type == "scored"]
    assert bad not in scored


async def test_a_stack_that_only_trades_seeds_is_built_on_next_not_split(tmp_path: Path) -> None:
    # Look-alikes: with ``- ant`` and ``- bee`` and no ``- ant_bee``, the one listed first
    # loses its items. One child adds ``bee`` (fixes bee, breaks ant), the other a line that
    # fixes nothing: their stack ties the baseline. No child is gated alone (each would only
    # repeat that); the next proposals build on the stack, shown the seeds it broke.
    container = RuleContainer(_with_ant(LABELS), rivals={"ant": "bee", "bee": "ant"})
    events = await _two_on_ant(tmp_path, container, ("bee", "zzz"))
    stack = next(e.data for e in events if e.type == "stack")
    gates = [e.data for e in events if e.type == "gate"]
    stack_gate = next(g for g in gates if g["candidate_id"] == stack["candidate_id"])
    assert not stack_gate["accepted"]
    assert stack_gate["child_score"] == stack_gate["parent_score"]
    assert not {g["candidate_id"] for g in gates} & set(stack["children"])
    built_on = [
        e.data
        for e in events
        if e.type == "iteration" and e.data.get("parent") == stack["candidate_id"]
    ]
    assert built_on and {"ant-0", "ant-1"} & set(built_on[0]["minibatch"])
    scored = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert max(scored.values()) > scored[stack["onto"]]  # the disambiguation was found on it


async def test_writers_at_the_same_time_split_the_kinds_of_failure_between_them(
    tmp_path: Path,
) -> None:
    # Six kinds of failure (two seeds each) and three writers asked at once: two kinds each,
    # none shown twice, so the wave's three edits fix three different things.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    holds = [proposer.hold(n) for n in (1, 2, 3)]

    async def release() -> None:
        while len(proposer.seen) < 3:
            await asyncio.sleep(0.01)
        for hold in holds:
            hold.set()

    releaser = asyncio.create_task(release())
    await _run(tmp_path, container, proposer, proposals_in_flight=3, max_metric_calls=150)
    await asyncio.wait_for(releaser, 5)
    views = [
        {e.feedback for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:3]
    ]
    assert [len(v) for v in views] == [2, 2, 2]
    assert len(set().union(*views)) == 6


async def test_the_search_stops_when_proposals_stop_improving_the_best(tmp_path: Path) -> None:
    # Every proposal adds a new line that fixes nothing: new candidates, never a better one.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(pick=lambda labels, n: f"zzz{n}")
    events: list[Event] = []
    result = await _run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=1,
        patience=4,
        max_idle_iterations=50,
    )
    reason = result.evidence["stop_reason"]
    assert "no better candidate in the last 4 proposals" in reason and "--patience 4" in reason
    assert len(proposer.seen) == 4
    # Off (0), the same run goes on until the idle rule or the budget ends it.
    other = tmp_path / "off"
    other.mkdir()
    container2 = RuleContainer(program(LABELS))
    proposer2 = ScriptedProposer(pick=lambda labels, n: f"zzz{n}")
    result2 = await _run(
        other,
        container2,
        proposer2,
        proposals_in_flight=1,
        patience=0,
        max_idle_iterations=50,
        max_metric_calls=120,
    )
    assert "patience" not in result2.evidence["stop_reason"] and len(proposer2.seen) > 4


@pytest.mark.parametrize("in_flight", [1, 4])
async def test_the_search_stops_once_every_failure_was_shown_and_nothing_new_came_of_it(
    tmp_path: Path, in_flight: int
) -> None:
    # The reflection model keeps the text as it is, whatever it is shown.
    def keep(labels: list[str], n: int) -> str:
        raise ProposalRejected("unchanged", "the text already says what it should")

    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(pick=keep)
    result = await _run(
        tmp_path,
        container,
        proposer,
        proposals_in_flight=in_flight,
        patience=0,
        max_idle_iterations=50,
    )
    assert result.evidence["stop_reason"] == CONVERGED
    shown = {
        m.group(1)
        for request in proposer.seen
        for e in (*request.evaluations, *request.train_evaluations)
        if (e.reward or 0.0) < 1.0 and (m := FEEDBACK.search(e.feedback))
    }
    assert shown == set(LABELS)  # every failure of the baseline, before it stopped
    # Far fewer calls than the idle rule would have let it make; with four in flight, no
    # writer was sent to repeat a failure while the others were still being written.
    assert len(proposer.seen) <= len(LABELS)


async def _junk_child(
    tmp_path: Path,
    labels: list[str],
    slipping: set[str],
    junk_at: int,
    release: Callable[[ScriptedProposer, list[Event]], Awaitable[None]],
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
    result = await _run(
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


async def test_the_search_stops_when_nothing_is_left_to_fix_in_the_best(tmp_path: Path) -> None:
    # The baseline has every label, but its student slips on cat-1 (a noisy student). Two
    # proposals on it are written at once: one finds nothing to change, the other adds a
    # junk line (``_junk_child``): the junk child scores below the baseline on train and
    # joins the frontier with cat-1. Proposals on it would chase what the baseline lost by
    # noise.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        await _release_when_both_asked(proposer)

    result, proposer, baseline, _ = await _junk_child(
        tmp_path, ["ant", "bee", "cat"], {"cat-1"}, 2, release, proposals_in_flight=2
    )
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    # Nothing was asked on the junk child, though its failures were never shown.
    assert len(proposer.seen) == 2
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline}


async def test_no_proposal_starts_on_a_member_below_a_best_with_nothing_to_fix(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline (``_junk_child``; its student slips on cat-1) written
    # at once: the first finds nothing to change, then the second adds the junk line, and
    # the third is held until the junk child is on the frontier (below the baseline, with
    # cat-1). Nothing is left to fix in the best, so the two free writers wait for the third
    # instead of starting on the junk child (nobody was shown its failures), and the search
    # stops when it is answered.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        first, second, third = proposer.hold(1), proposer.hold(2), proposer.hold(3)
        while len(proposer.seen) < 3:
            await asyncio.sleep(0.01)
        first.set()
        while not any(e.type == "proposal_rejected" for e in events):
            await asyncio.sleep(0.01)
        second.set()
        while sum(e.type == "scored" for e in events) < 2:  # the baseline, then the junk child
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # time for the free writers to start on it, if they would
        third.set()

    result, proposer, baseline, _ = await _junk_child(
        tmp_path, ["ant", "bee", "cat"], {"cat-1"}, 2, release, proposals_in_flight=3
    )
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert [r.parent.candidate_id for r in proposer.seen] == [baseline] * 3


async def test_a_writer_back_with_nothing_waits_a_moment_for_those_asked_with_it(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline (``_junk_child``; its student slips on bee-1 and
    # cat-1, two kinds) are written at once. The third adds the junk line at once, and its
    # writer starts on the junk child (held), shown some of its many failures. The first two
    # find nothing to change and answer a moment apart. The first back waits for the second
    # before choosing: with both answers in, nothing is left to fix in the best, and it does
    # not start on the junk child too.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        first, second, on_junk = proposer.hold(1), proposer.hold(2), proposer.hold(4)
        while len(proposer.seen) < 4:  # the junk child's writer started on it
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        first.set()
        await asyncio.sleep(0.005)  # a moment apart, as a hosted model's answers come
        second.set()
        await asyncio.sleep(0.3)  # time to start on the junk child, if a writer would
        on_junk.set()

    labels = ["ant", "bee", "cat", "cow", "dog", "eel"]
    result, proposer, baseline, junk = await _junk_child(
        tmp_path, labels, {"bee-1", "cat-1"}, 3, release, proposals_in_flight=3, minibatch_size=2
    )
    shown = [
        {m.group(1) for e in r.evaluations if (m := FEEDBACK.search(e.feedback))}
        for r in proposer.seen[:2]
    ]
    assert shown[0] | shown[1] == {"bee", "cat"} and shown[0] != shown[1]  # one kind each
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert [r.parent.candidate_id for r in proposer.seen] == [baseline] * 3 + [junk]


@pytest.mark.parametrize(
    "dog_slips",
    [
        {"ant-0", "ant-1", "bee-0"},  # the dog child ties the baseline
        {"ant-0", "ant-1", "bee-0", "bee-1"},  # it scores below
    ],
)
async def test_the_search_stops_when_the_fix_of_the_best_only_tied_it_and_found_nothing_more(
    tmp_path: Path, dog_slips: set[str]
) -> None:
    # The baseline lacks dog, and its noisy student slips on cat-1. Two proposals on it are
    # written at once: the one shown dog adds it (its student then slips on three seeds the
    # baseline passed: a tie, by noise; or on four: below it); the other, shown cat-1 and
    # held back, adds a junk line. The dog child is built on next and its failures are
    # answered with nothing new. The junk child then arrives: it slips on every seed but
    # those of its own gate (cat-1 and ant-1), so it passes the gate, scores below the
    # baseline on train and joins the frontier (cat-1 beats the baseline).
    # The best's failures were answered by the dog child, in which nothing more was found to
    # fix: the search stops there, with no proposal on the junk child.
    labels = ["ant", "bee", "cat", "dog"]
    prog = program(labels)
    prog["components"][0]["text"] = "\n".join([BASELINE, *(f"- {x}" for x in labels[:3])])
    proposer = ScriptedProposer()

    def slips(prompt: str, seed: str) -> bool:
        if "- zzz" in prompt:
            return seed not in {e.seed for e in proposer.seen[1].evaluations}
        if "- dog" in prompt:
            return seed in dog_slips
        return seed == "cat-1"

    def answer(request: ProposalRequest, n: int) -> str | None:
        text = request.parent.components["system_prompt"]
        shown = {m.group(1) for e in request.evaluations if (m := FEEDBACK.search(e.feedback))}
        if "- dog" in text:
            return None  # the tie's failures are slips: nothing to fix
        if n == 2:
            return f"{text}\n- zzz"
        return f"{text}\n- dog" if "dog" in shown else None

    proposer.script = answer
    held = proposer.hold(2)

    events: list[Event] = []

    async def release() -> None:  # once the dog child's failures were answered
        while not any(e.type == "proposal_rejected" for e in events):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        held.set()

    releaser = asyncio.create_task(release())
    result = await _run(
        tmp_path,
        RuleContainer(prog, slips=slips),
        proposer,
        events,
        proposals_in_flight=2,
        patience=0,
        max_idle_iterations=50,
    )
    await asyncio.wait_for(releaser, 5)
    assert {e.seed for e in proposer.seen[1].evaluations} == {"cat-1", "ant-1"}
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    added = {e.data["candidate_id"]: e.data["diff"] for e in events if e.type == "candidate"}
    baseline = next(iter(train))
    tie = next(c for c, diff in added.items() if "\n+- dog" in diff)
    junk = next(c for c, diff in added.items() if "\n+- zzz" in diff)
    assert train[tie] == train[baseline] - (len(dog_slips) - 3) / len(prog["seeds"]["train"])
    assert train[junk] < train[baseline]
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline, tie}


async def _drops_bee(
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
    result = await _run(
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


def _without_bee(request: ProposalRequest) -> str:
    return request.parent.components["system_prompt"].replace("\n- bee", "")


async def test_a_child_that_only_dropped_a_line_and_tied_its_parent_is_not_built_on(
    tmp_path: Path,
) -> None:
    # The baseline has every label (``_drops_bee``). The first answer drops the bee line:
    # that child's student slips on nothing, so it passes its gate (on the two slips) and
    # ties the baseline on train. Built on, it would be shown bee's seeds and write back the
    # line it dropped. It is not: the baseline's failures are asked again, answered with
    # nothing new, and the search stops with the baseline as the best.
    def answer(request: ProposalRequest, n: int) -> str | None:
        return _without_bee(request) if n == 1 else None

    result, proposer, _, train = await _drops_bee(tmp_path, ["ant", "bee", "cat"], answer)
    baseline, dropped = list(train)[:2]
    assert train[dropped] == train[baseline]  # a trade: ant-1 and cat-1 for bee-0 and bee-1
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert len(proposer.seen) == 2
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline}


async def test_a_dropped_line_written_again_is_not_taken_for_nothing_new(tmp_path: Path) -> None:
    # The baseline lacks dog (``_drops_bee``). The first answer drops the bee line: that
    # child ties the baseline on train. The second answer drops it again, a duplicate of that
    # child: an error written twice, not "nothing to fix", so the failures are asked again
    # and dog is added.
    def answer(request: ProposalRequest, n: int) -> str | None:
        if n <= 2:
            return _without_bee(request)
        return f"{request.parent.components['system_prompt']}\n- dog" if n == 3 else None

    _, proposer, events, train = await _drops_bee(tmp_path, ["ant", "bee", "cat", "dog"], answer)
    baseline, dropped = list(train)[:2]
    assert train[dropped] == train[baseline]
    rejected = [e.data["reason"] for e in events if e.type == "proposal_rejected"]
    assert rejected[0] == "duplicate"
    assert len(proposer.seen) >= 3
    assert max(train.values()) > train[baseline]  # dog was added


async def test_a_refused_answer_is_not_taken_for_nothing_new(tmp_path: Path) -> None:
    # The first answer is cut off after every failure was shown; the search asks again.
    def cut_off_first(labels: list[str], n: int) -> str:
        if n == 1:
            raise ProposalRejected("cut_off", "the answer ran out of tokens")
        return labels[0]

    proposer = ScriptedProposer(pick=cut_off_first)
    result = await _run(
        tmp_path,
        RuleContainer(program(LABELS[:2])),
        proposer,
        proposals_in_flight=1,
        patience=0,
        max_idle_iterations=50,
    )
    assert "scores full marks on every train seed" in result.evidence["stop_reason"]
    assert len(proposer.seen) >= 3


async def test_a_stack_that_broke_seeds_is_stacked_again_without_the_child_to_blame(
    tmp_path: Path,
) -> None:
    # Two children written at once on the "- ant" baseline: one adds bee, the other drops
    # ant and adds a line that fixes nothing (an answer that made the text worse). Their
    # stack is scored first on the seeds its base solves (ant's two, and two more to fill a
    # round of four); it broke them, so the one whose edit removed a line is scored alone on
    # those, and the stack is dropped there, its other 8 train seeds unpaid.
    events = await _on_the_baseline(
        tmp_path,
        RuleContainer(_with_ant(LABELS)),
        delays=(1.0, 0.0),
        pick=lambda labels, n: "bee" if "bee" in labels else labels[0],
        drops=frozenset({2}),
        drop_adds="- zzz",
        config={"concurrency": 4},
    )
    good, bad = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")["candidate_id"]
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["candidate_id"] == stack and sorted(blame["broken"]) == ["ant-0", "ant-1"]
    assert blame["suspects"] == [bad] and blame["culprits"] == [bad]
    paid = [
        t["seed"]
        for e in events
        if e.type == "trials"
        for t in e.data["trials"]
        if t["candidate_id"] == stack and not t["cached"]
    ]
    assert {"ant-0", "ant-1"} <= set(paid) and len(paid) == 4
    assert blame["early"]
    assert stack not in {e.data["candidate_id"] for e in events if e.type == "scored"}
    # What is accepted next is the stack without it: ant kept, bee added.
    after = events[events.index(next(e for e in events if e.type == "blame")) :]
    accepted = next(e.data for e in after if e.type == "gate" and e.data["accepted"])
    assert accepted["candidate_id"] == good
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[good] == pytest.approx(2 / len(LABELS))


async def test_a_sibling_that_conflicted_only_with_the_culprit_joins_the_restack(
    tmp_path: Path,
) -> None:
    # Three children written at once on the "- ant" baseline. The first rewords the head,
    # drops ant and adds bee (it breaks ant's seeds); the second adds cat; the third words
    # the head another way and adds dog, so its edit conflicts with the first's and it is
    # left out of the stack. The first is to blame: the restack without it takes the third
    # too, rather than leaving it to be rebased and gated alone afterwards.
    def answer(request: ProposalRequest, n: int) -> str:
        head, *rest = request.parent.components["system_prompt"].splitlines()
        if n == 1:
            return "\n".join(["Reworded head.", *(x for x in rest if x != "- ant"), "- bee"])
        if n == 2:
            return "\n".join([head, *rest, "- cat"])
        return "\n".join(["Another head.", *rest, "- dog"])

    events = await _on_the_baseline(
        tmp_path,
        RuleContainer(_with_ant(LABELS)),
        delays=(1.0, 0.0, 0.0),
        script=answer,
        config={"concurrency": 4},
    )
    bad, good, other = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    first, restack = [e.data for e in events if e.type == "stack"][:2]
    assert sorted(first["children"]) == sorted([bad, good])
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["culprits"] == [bad]
    assert sorted(restack["children"]) == sorted([good, other])
    gate = next(e.data for e in events if e.type == "gate" and e.data["accepted"])
    assert gate["candidate_id"] == restack["candidate_id"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[restack["candidate_id"]] == pytest.approx(3 / len(LABELS))
    alone = {e.data.get("candidate_id") for e in events if e.type in ("gate", "rebase")}
    assert other not in alone


async def test_an_edit_that_adds_nothing_is_dropped_when_written_with_edits_that_do(
    tmp_path: Path,
) -> None:
    # Three children written at once on the "- ant" baseline: two add a label each, the
    # second drops ant and adds nothing. Stacked, it could only break ant's seeds, and
    # finding that would take a round of rollouts and a restack while the writers wait. The
    # stack is the other two's edits, judged at once with no blame; the dropper is dropped.
    events = await _on_the_baseline(
        tmp_path,
        RuleContainer(_with_ant(LABELS)),
        delays=(0.5, 0.0, 0.0),
        pick=lambda labels, n: labels[0],
        drops=frozenset({2}),
        config={"concurrency": 4},
    )
    first, dropper, third = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    assert not [e for e in events if e.type == "blame"]
    stack = next(e.data for e in events if e.type == "stack")
    assert sorted(stack["children"]) == sorted([first, third])
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == stack["candidate_id"] and gate["accepted"]
    skipped = next(e.data for e in events if e.type == "skipped")
    assert skipped["candidate_id"] == dropper and "adds nothing" in skipped["reason"]
    touched = {e.data.get("candidate_id") for e in events if e.type in ("gate", "rebase")}
    assert dropper not in touched


async def test_a_stack_whose_text_one_child_wrote_already_is_that_child(tmp_path: Path) -> None:
    # Two answers written at once on the baseline: one adds ant, the other ant and bee (a
    # model that fixed two things). Their stack is the second child's text: it is judged
    # as the stack and accepted, not refused as a duplicate (which left the first child
    # gated alone and dropped the second as already in the best when rebased on it).
    def answer(request: ProposalRequest, n: int) -> str:
        text = request.parent.components["system_prompt"]
        return f"{text}\n- ant" if n == 1 else f"{text}\n- ant\n- bee"

    events = await _on_the_baseline(
        tmp_path, RuleContainer(program(LABELS)), delays=(0.5, 0.0), script=answer
    )
    one, both = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")
    assert stack["candidate_id"] == both and sorted(stack["children"]) == sorted([one, both])
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == both and gate["accepted"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[both] == pytest.approx(2 / len(LABELS))


async def test_an_edit_that_adds_nothing_written_alone_is_gated(tmp_path: Path) -> None:
    # The same answer with no sibling: a deletion may fix something, so it is gated.
    container, proposer = RuleContainer(_with_ant(LABELS)), ScriptedProposer(drops=frozenset({1}))
    events: list[Event] = []
    await _run(tmp_path, container, proposer, events, proposals_in_flight=1)
    dropper = next(e.data for e in events if e.type == "candidate")["candidate_id"]
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == dropper and not gate["accepted"]
    assert not [e for e in events if e.type == "skipped" and "adds nothing" in e.data["reason"]]


async def test_children_still_waiting_are_dropped_once_the_best_has_full_marks(
    tmp_path: Path,
) -> None:
    # Two proposals on the baseline answer together, each adding the one missing label and
    # rewording the first line (so they do not stack). The first is gated, accepted and
    # scores full marks on every train seed: nothing can beat it, so the second, waiting
    # its turn, is neither rebased nor gated.
    events = await _on_the_baseline(
        tmp_path,
        RuleContainer(program(LABELS[:1])),
        delays=(0.0, 0.0),
        conflicting=True,
    )
    first, second = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stopped = next(e.data for e in events if e.type == "search_stopped")
    assert stopped["reason"] == f"{first} scores full marks on every train seed"
    later = [e for e in events if e.type in ("gate", "rebase", "stack")]
    assert [e.data["candidate_id"] for e in later] == [first]


async def test_a_stale_child_that_conflicts_with_the_new_best_is_dropped(tmp_path: Path) -> None:
    # Two proposals on the baseline each word its first line anew; the first is accepted as
    # the new best while the second is still being written. The second's edit conflicts
    # with the best's: it is dropped, not gated against the stale baseline as a branch.
    proposer = ScriptedProposer(rewording=True)
    first_hold, second_hold = proposer.hold(1), proposer.hold(2)
    baseline: list[str] = []

    def listen(event: Event) -> None:
        if event.type == "scored" and event.data["split"] == "train":
            if baseline and event.data["candidate_id"] not in baseline:
                second_hold.set()  # the first child is the new best: now the second answers
            baseline.append(event.data["candidate_id"])
        if event.type == "iteration" and event.data.get("iteration") == 2:
            first_hold.set()

    events: list[Event] = []
    await _run(
        tmp_path,
        RuleContainer(program(LABELS)),
        proposer,
        events,
        on_event=listen,
        proposals_in_flight=2,
        minibatch_size=2 * len(LABELS),
    )
    first, second = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    rebase = next(e.data for e in events if e.type == "rebase" and e.data["candidate_id"] == second)
    assert rebase["reason"] == "conflict" and rebase["dropped"] is True
    gated = [e.data["candidate_id"] for e in events if e.type == "gate"]
    assert first in gated and second not in gated


async def test_an_answer_that_goes_back_to_an_older_text_is_not_taken_for_nothing_new(
    tmp_path: Path,
) -> None:
    # The second proposal drops the line the first added: its text is the baseline's, a
    # duplicate of the parent's ancestor. That is a regression, not a model that saw the
    # failures and found nothing to write: the search goes on and solves the rest.
    container, proposer = RuleContainer(program(["ant", "bee"])), ScriptedProposer()
    proposer.drops = frozenset({2})
    result = await _run(tmp_path, container, proposer, proposals_in_flight=1, patience=0)
    assert result.evidence["stop_reason"] != CONVERGED
    assert "full marks" in result.evidence["stop_reason"]


def _sent_at_gate(
    container: RuleContainer,
) -> tuple[dict[str, tuple[int, int]], Callable[[Event], None]]:
    """For each child gated against one parent: the rollouts of it sent by its first gate
    event and the seeds that gate judged on; and the event listener that records them."""
    sent_at_gate: dict[str, tuple[int, int]] = {}

    def listen(event: Event) -> None:
        if event.type == "gate" and isinstance(event.data["parent"], str):
            cid = event.data["candidate_id"]
            sent = sum(n for (h, _), n in container.calls.items() if h.startswith(cid))
            sent_at_gate.setdefault(cid, (sent, len(event.data["minibatch"])))

    return sent_at_gate, listen


async def test_one_writer_scores_the_child_on_spare_seeds_in_the_gates_round(
    tmp_path: Path,
) -> None:
    # With one proposal in flight the gate's minibatch (2 seeds) leaves 6 of 8 slots idle:
    # the gate adds 6 more train seeds to that round and judges on all 8, and a child that
    # passes needs fewer rounds for its full train evaluation.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    sent_at_gate, listen = _sent_at_gate(container)
    await _run(
        tmp_path,
        container,
        proposer,
        on_event=listen,
        proposals_in_flight=1,
        concurrency=8,
        minibatch_size=2,
    )
    assert sent_at_gate
    for scored, judged in sent_at_gate.values():
        assert judged == 8 and scored == 8  # the minibatch of 2 and 6 more, in one round
    assert max(container.calls.values()) == 1  # and none of them paid for twice


async def test_a_waves_one_child_is_scored_on_idle_slots_in_its_gates_round(
    tmp_path: Path,
) -> None:
    # Two writers answer together with the same text: the wave has one child, and the other
    # writer waits for its judgement. Nothing else holds a rollout slot (no holdout is
    # scored behind it), so its gate's round is filled: the minibatch and more train seeds,
    # 8 rollouts at concurrency 8, and a child that passes needs a round fewer for its full
    # train evaluation. The gate still judges on its minibatch alone. Before, with several
    # in flight the gate sent its minibatch alone.
    container = RuleContainer(program(LABELS, holdout=0))
    proposer = ScriptedProposer(fixed_label="ant")
    release = _release_when_both_asked(proposer)
    sent_at_gate, listen = _sent_at_gate(container)
    events: list[Event] = []
    await _run(
        tmp_path,
        container,
        proposer,
        events,
        on_event=listen,
        proposals_in_flight=2,
        concurrency=8,
        minibatch_size=2,
        lift_without_holdout=True,
    )
    await release
    wave = {
        e.data["candidate_id"]
        for e in events
        if e.type == "candidate" and e.data["iteration"] in (1, 2)
    }
    assert len(wave) == 1  # one text from both writers
    assert not any(e.type == "stack" for e in events)  # gated alone, not stacked
    (child,) = wave
    sent, judged = sent_at_gate[child]
    assert sent == 8 and judged < 8  # the round filled; judged on its minibatch (and extension)
    assert max(container.calls.values()) == 1  # none of them paid for twice


async def test_a_writer_that_only_waits_takes_no_iteration_and_no_minibatch(
    tmp_path: Path,
) -> None:
    # Four writers, two kinds of failure: two writers take them and two wait for the news,
    # waking each time a proposal ends or a child is settled. How often that is depends on
    # timing; a wait that took an iteration number and a minibatch from the rotation made
    # every later minibatch depend on it too, and a run with several in flight unrepeatable.
    proposer = ScriptedProposer()
    first, second = proposer.hold(1), proposer.hold(2)

    async def answer_one_by_one() -> None:  # the waiting writers wake at each answer
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.01)
        for held in (first, second):
            await asyncio.sleep(0.1)
            held.set()

    answering = asyncio.create_task(answer_one_by_one())
    events: list[Event] = []
    result = await _run(
        tmp_path, RuleContainer(program(LABELS[:2])), proposer, events, proposals_in_flight=4
    )
    await asyncio.wait_for(answering, 5)
    assert result.promoted
    numbers = [e.data["iteration"] for e in events if e.type == "iteration"]
    assert len(numbers) >= 2
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # one per proposal, no gaps


async def test_a_stack_replays_its_children_in_the_order_they_were_asked(tmp_path: Path) -> None:
    # Two writers on the baseline add bee and cat; the second asked answers first, so its
    # child takes the acceptance turn. Its stack lists bee before cat all the same: which
    # answer came in first (a matter of timing) does not change the stack's text, its id or
    # what is asked of the student after it.
    proposer = ScriptedProposer(
        script=lambda request, n: (
            request.parent.components["system_prompt"]
            + f"\n- {('bee', 'cat')[n - 1] if n <= 2 else 'dog'}"
        )
    )
    first, second = proposer.hold(1), proposer.hold(2)

    async def second_answers_first() -> None:
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.5)  # answers that took a while: siblings are waited for
        second.set()
        await asyncio.sleep(0.02)
        first.set()

    answering = asyncio.create_task(second_answers_first())
    events: list[Event] = []
    await _run(
        tmp_path,
        RuleContainer(program(LABELS)),
        proposer,
        events,
        proposals_in_flight=2,
        max_idle_iterations=2,
    )
    await asyncio.wait_for(answering, 5)
    added = {e.data["candidate_id"]: e.data["diff"] for e in events if e.type == "candidate"}
    bee, cat = (
        next(c for c, diff in added.items() if diff.endswith(f"+- {x}\n")) for x in ("bee", "cat")
    )
    stack = next(e.data for e in events if e.type == "stack")
    assert stack["children"] == [bee, cat]
    text = added[stack["candidate_id"]]
    assert text.index("+- bee") < text.index("+- cat")


async def test_a_rewrite_whose_new_rule_trades_look_alike_seeds_is_not_to_blame(
    tmp_path: Path,
) -> None:
    # Look-alikes ant and bee on the "- ant" baseline. Two children written at once: the
    # first rewords the head and adds bee (a rewrite that keeps every rule), the second adds
    # cat. Their stack breaks ant's seeds, and the rewrite alone does too; but so does the
    # line it added, kept without the rewording: the break is the trade bee makes (the
    # items of the one listed first go to the other), not damage. Nobody is to blame; the
    # stack is accepted whole, and the next writers are shown the seeds it broke (their
    # feedback asks for "ant_bee"), not asked for bee again.
    def answer(request: ProposalRequest, n: int) -> str:
        head, *rest = request.parent.components["system_prompt"].splitlines()
        if n == 1:
            return "\n".join(["Reworded head.", *rest, "- bee"])
        if n == 2:
            return "\n".join([head, *rest, "- cat"])
        return "\n".join([head, *rest, "- ant_bee"])

    events = await _on_the_baseline(
        tmp_path,
        RuleContainer(_with_ant(LABELS), rivals={"ant": "bee", "bee": "ant"}),
        delays=(1.0, 0.0),
        script=answer,
        config={"concurrency": 4},
    )
    rewrite, cat = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")
    assert sorted(stack["children"]) == sorted([rewrite, cat])
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["suspects"] == [rewrite] and blame["culprits"] == []
    assert sorted(blame["broken"]) == ["ant-0", "ant-1"]
    accepted = next(e.data for e in events if e.type == "gate" and e.data["accepted"])
    assert accepted["candidate_id"] == stack["candidate_id"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[stack["candidate_id"]] == pytest.approx(4 / 12)  # bee and cat; ant traded
    shown = [
        set(e.data["minibatch"])
        for e in events
        if e.type == "iteration" and e.data.get("parent") == stack["candidate_id"]
    ]
    assert any({"ant-0", "ant-1"} <= seeds for seeds in shown)
