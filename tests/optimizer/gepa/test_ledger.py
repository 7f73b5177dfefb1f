"""The failure ledger: kinds of failure, what proposals were shown, what came of it."""

from __future__ import annotations

from pathlib import Path

from optimizer.gepa.ledger import FailureLedger, Shown, failure_kind
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.strategies.batch_sampler import BatchRequest
from optimizer.gepa.strategies.stop_condition import CONVERGED
from proposer import ProposalRequest
from schemas import ProposalRejected
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import lineage_state, search_for
from tests.optimizer.gepa.runs import LABELS, drops_bee, whole_run, without_bee

SCORES = {"parent": {"ant-0": 0.0, "bee-0": 0.0, "cow-0": 0.0, "cat-0": 1.0, "cat-1": 1.0}}
KINDS = {s: f"kind:{s[:3]}" for s in ("ant-0", "bee-0", "cow-0")}


def test_failures_with_the_same_feedback_are_one_kind() -> None:
    a = failure_kind("s1", "routed to billing, expected refunds")
    assert a == failure_kind("s2", "routed to billing,\n expected refunds ")
    assert a != failure_kind("s3", "routed to billing, expected invoices")
    assert failure_kind("s5", "expected 42") != failure_kind("s6", "expected 41")
    assert failure_kind("s4", "  ") == "s4"  # no feedback: the seed is its own kind


def _ledger(in_flight: int = 1) -> tuple[GepaSearch, FailureLedger, str]:
    state, ids = lineage_state(SCORES, {})
    search = search_for(state, proposals_in_flight=in_flight)
    search._ledger._kinds[ids["parent"]] = dict(KINDS)
    return search, search._ledger, ids["parent"]


def _shown(search: GepaSearch, parent: str, *, accepting: bool = False) -> Shown | None:
    """What the next proposal on ``parent`` is shown (the batch sampler, then the ledger)."""
    state, ctx = search._d.state, search._ctx
    request = BatchRequest(
        parent,
        ["cat-0", "cat-1"],
        state.train_seeds,
        state.train.get(parent),
        in_flight=ctx.in_flight,
    )
    batch = search._s.batch_sampler.sample(request, search._ledger, search._d.rng)
    return search._ledger.take(parent, batch.minibatch, batch.context, accepting=accepting)


def test_a_parent_is_exhausted_once_every_kind_was_shown_this_round() -> None:
    search, ledger, parent = _ledger()
    assert ledger.is_unasked(parent) and parent not in ledger.exhausted()
    shown = _shown(search, parent)
    assert shown is not None and set(KINDS.values()) <= set(shown.marks)
    assert not ledger.is_unasked(parent) and parent in ledger.exhausted()
    assert ledger.open_proposals == 1 and all(ledger.taken[m] == 1 for m in shown.marks)
    ledger.release(1, shown)
    assert ledger.open_proposals == 0 and not +ledger.taken
    ledger.new_round({parent})
    assert ledger.is_unasked(parent) and parent not in ledger.exhausted()


def test_a_proposal_waits_when_all_it_could_be_shown_is_taken_and_a_child_is_accepted() -> None:
    search, ledger, parent = _ledger()
    first = _shown(search, parent)
    assert first is not None
    assert _shown(search, parent, accepting=True) is None  # the fix is on its way: wait
    assert _shown(search, parent, accepting=False) is not None  # nothing to wait for: go


def test_an_unchanged_answer_leaves_nothing_to_fix_and_a_step_back_does_not() -> None:
    search, ledger, parent = _ledger()
    shown = _shown(search, parent)
    assert shown is not None
    ledger.note_rejection(1, (parent,), "unchanged")
    ledger.release(1, shown)
    assert ledger.has_nothing_to_fix(parent)
    assert ledger.retired({parent}) == {parent}
    assert ledger.nothing_to_fix_in({parent})
    # A duplicate of one of its ancestors is a step back, not "nothing new".
    state, ids = lineage_state({**SCORES, "child": SCORES["parent"]}, {"child": ["parent"]})
    other = search_for(state)
    other._ledger._kinds[ids["child"]] = dict(KINDS)
    again = _shown(other, ids["child"])
    assert again is not None
    parent_hash = state.candidates[ids["parent"]].content_hash
    other._ledger.note_rejection(
        2, (ids["child"],), "duplicate", other._candidates.with_hash(parent_hash)
    )
    other._ledger.release(2, again)
    assert other._ledger.repeats[ids["child"]] == 1
    assert not other._ledger.has_nothing_to_fix(ids["child"])


def test_a_refused_answer_is_not_taken_for_nothing_new() -> None:
    search, ledger, parent = _ledger()
    shown = _shown(search, parent)
    assert shown is not None
    ledger.note_rejection(1, (parent,), "refused")
    ledger.release(1, shown)
    assert not ledger.has_nothing_to_fix(parent)
    assert ledger.retired({parent}) == set()


def test_an_unproven_deletion_is_exhausted_and_retired() -> None:
    search, ledger, parent = _ledger()
    search._d.state.held_back.add(parent)
    assert parent in ledger.exhausted()
    assert ledger.retired({parent}) == {parent}


def test_a_second_round_on_a_member_shows_every_proposal_what_no_answer_found_nothing_in() -> None:
    # Two proposals split the parent's three kinds of failure (two and one). The one shown
    # two kinds answered with nothing new; the other answered with an error (a deleted line:
    # no candidate kept). In the next round that one kind is not one proposal's share among
    # three again: both proposals are shown it first.
    search, ledger, parent = _ledger(in_flight=2)
    first = [_shown(search, parent) for _ in range(2)]
    assert first[0] is not None and first[1] is not None
    nothing_new, spoilt = sorted(first, key=lambda shown: -len(shown.marks))
    ledger.note_rejection(1, (parent,), "unchanged")
    ledger.release(1, nothing_new)
    ledger.release(2, spoilt)
    assert not ledger.has_nothing_to_fix(parent)
    ledger.new_round({parent})
    again = [_shown(search, parent) for _ in range(2)]
    assert again[0] is not None and again[1] is not None
    assert again[0].minibatch[0] == again[1].minibatch[0] == spoilt.minibatch[0]


async def test_a_dropped_line_written_again_is_not_taken_for_nothing_new(tmp_path: Path) -> None:
    # The baseline lacks dog (``drops_bee``). The first answer drops the bee line: that
    # child ties the baseline on train. The second answer drops it again, a duplicate of that
    # child: an error written twice, not "nothing to fix", so the failures are asked again
    # and dog is added.
    def answer(request: ProposalRequest, n: int) -> str | None:
        if n <= 2:
            return without_bee(request)
        return f"{request.parent.components['system_prompt']}\n- dog" if n == 3 else None

    _, proposer, events, train = await drops_bee(tmp_path, ["ant", "bee", "cat", "dog"], answer)
    baseline, dropped = list(train)[:2]
    assert train[dropped] == train[baseline]
    rejected = [e.data["reason"] for e in events if e.type == "proposal_rejected"]
    assert rejected[0] == "duplicate"
    assert len(proposer.seen) >= 3
    assert max(train.values()) > train[baseline]  # dog was added


async def test_a_run_asks_again_after_a_refused_answer(tmp_path: Path) -> None:
    # The first answer is cut off after every failure was shown; the search asks again.
    def cut_off_first(labels: list[str], n: int) -> str:
        if n == 1:
            raise ProposalRejected("cut_off", "the answer ran out of tokens")
        return labels[0]

    proposer = ScriptedProposer(pick=cut_off_first)
    result = await whole_run(
        tmp_path,
        RuleContainer(program(LABELS[:2])),
        proposer,
        proposals_in_flight=1,
        patience=0,
        max_idle_iterations=50,
    )
    assert "scores full marks on every train seed" in result.evidence["stop_reason"]
    assert len(proposer.seen) >= 3


async def test_an_answer_that_goes_back_to_an_older_text_is_not_taken_for_nothing_new(
    tmp_path: Path,
) -> None:
    # The second proposal drops the line the first added: its text is the baseline's, a
    # duplicate of the parent's ancestor. That is a regression, not a model that saw the
    # failures and found nothing to write: the search goes on and solves the rest.
    container, proposer = RuleContainer(program(["ant", "bee"])), ScriptedProposer()
    proposer.drops = frozenset({2})
    result = await whole_run(tmp_path, container, proposer, proposals_in_flight=1, patience=0)
    assert result.evidence["stop_reason"] != CONVERGED
    assert "full marks" in result.evidence["stop_reason"]
