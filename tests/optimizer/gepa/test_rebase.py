"""Rebasing: a child written on a best that was replaced meanwhile is replayed on the new one."""

from __future__ import annotations

from pathlib import Path

from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, whole_run
from workspace import Workspace


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

    await whole_run(
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
    await whole_run(
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
