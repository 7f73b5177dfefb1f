"""Rebasing: a child written on a best that was replaced meanwhile is replayed on the new one.

The unit tests drive the ``Rebaser`` over the recording fakes (``parts.wired``): a seed
``<label>-<i>`` passes when the prompt lists the label. The whole runs after them check
rebasing inside the search.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.gepa.rebase import CONFLICT, REDUNDANT
from optimizer.gepa.strategies.batch_sampler import BatchRequest
from schemas import CandidateRecord, Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import SEEDS, Wired, wired
from tests.optimizer.gepa.runs import LABELS, whole_run
from workspace import Workspace


async def _stale(child_text: str, best_text: str) -> tuple[Wired, str, CandidateRecord, str]:
    """A child ``child_text`` written on ``Label it.\\n- ant``, and ``best_text``, the child of
    that parent that replaced it as the best meanwhile."""
    w = wired()
    parent = await w.scored("Label it.\n- ant")
    child = w.child(child_text, parent)
    best = await w.scored(best_text, [parent])
    return w, parent, child, best


@pytest.mark.parametrize(
    ("child_text", "best_text", "why", "reason"),
    [
        # both reworded the first line, two ways: the best's version already won
        ("Name the label.\n- ant\n- cat", "Say the label.\n- ant\n- bee", CONFLICT, "conflict"),
        (
            "Label it.\n- ant\n- bee",
            "Label it.\n- ant\n- bee\n- cat",
            REDUNDANT,
            "already in the best",
        ),
    ],
)
async def test_an_edit_that_conflicts_with_the_new_best_or_that_it_has_is_dropped(
    child_text: str, best_text: str, why: str, reason: str
) -> None:
    w, parent, child, best = await _stale(child_text, best_text)
    assert await w.rebaser.rebase(1, 0, child, parent, best) == why
    (event,) = w.events.of("rebase")
    assert event == {
        "iteration": 1,
        "candidate_id": child.candidate_id,
        "onto": best,
        "applied": False,
        "reason": reason,
        "dropped": True,
    }
    assert w.workspace.candidates == [] and w.ctx.gepa.proposals == {}


async def test_an_edit_replayed_cleanly_on_the_new_best_is_a_candidate_logged_under_its_key() -> (
    None
):
    w, parent, child, best = await _stale("Label it.\n- ant\n- cat", "Label it.\n- ant\n- bee")
    rebased = await w.rebaser.rebase(3, 1, child, parent, best)
    assert isinstance(rebased, CandidateRecord)
    assert rebased.components["system_prompt"] == "Label it.\n- ant\n- bee\n- cat"
    assert rebased.parents == [best, child.candidate_id] and rebased.origin == "merge"
    assert w.workspace.candidates == [rebased]
    assert w.ctx.gepa.proposals == {"3r1": rebased.candidate_id}  # a resumed run replays it
    (event,) = w.events.of("rebase")
    assert event["applied"] and event["rebased"] == rebased.candidate_id


async def test_an_edit_that_holds_the_bests_already_is_the_child_itself() -> None:
    w, parent, child, best = await _stale(
        "Label it.\n- ant\n- bee\n- cat", "Label it.\n- ant\n- bee"
    )
    assert await w.rebaser.rebase(1, 0, child, parent, best) is child


async def test_a_rebased_edit_is_gated_on_its_targets_the_new_best_fails_and_seeds_it_passes() -> (
    None
):
    # The edit was meant to fix bee-0, cat-0 and cat-1; the new best fixed bee-0 already.
    w = wired()
    parent = await w.scored("- ant")
    best = await w.scored("- ant\n- bee", [parent])
    rotation = ["bee-0", "cat-0", "cow-0", "ant-0"]
    seeds, extension = await w.rebaser.seeds_for(best, ["bee-0", "cat-0", "cat-1"], rotation)
    assert seeds == ["cat-0", "cat-1", "bee-0", "ant-0"]  # half targets, then seeds it passes
    assert extension and all(w.state.train[best][s] < 1.0 for s in extension)
    assert not set(extension) & set(seeds)


async def test_an_edit_whose_targets_the_new_best_fixed_is_gated_on_its_batch() -> None:
    w = wired()
    parent = await w.scored("- ant")
    best = await w.scored("- ant\n- bee", [parent])
    rotation = ["bee-0", "cat-0", "cow-0", "ant-0"]
    rng = w.search._d.rng
    before = rng.getstate()
    chosen = await w.rebaser.seeds_for(best, ["bee-0", "bee-1"], rotation)
    rng.setstate(before)
    request = BatchRequest(best, rotation, SEEDS, w.state.train[best], share=False)
    batch = w.search._s.batch_sampler.sample(request, w.ledger, rng)
    assert chosen == (batch.minibatch, batch.context)


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
