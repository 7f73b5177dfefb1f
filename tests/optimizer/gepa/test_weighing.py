"""The ``--select`` rule at the gate: a tie on reward won on the rule's objective is kept, and
under ``best-under`` a child over the bound is not explored.

Driven through a ``MinibatchGate`` over the recording fakes (``parts.wired``): a seed
``<label>-<i>`` passes when the prompt lists the label, so the filler text below changes a
prompt's length and nothing of its reward. The student's cost is unknown there, so
``cheapest-within`` weighs the prompt's length, as the ranking does.
"""

from __future__ import annotations

from optimizer.gepa.decisions import gepa_decisions
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.strategies.acceptance import StrictImprovementAcceptance
from optimizer.gepa.weighing import weigh
from schemas import Event, parse_select
from tests.optimizer.gepa.parts import Wired, wired

FILLER = "\n- (say it politely, and " + "very " * 40 + "clearly)"
MINIBATCH = ["ant-0", "bee-0"]


async def _gate(parent_text: str, rule: str) -> tuple[Wired, MinibatchGate, str]:
    w = wired(idle=2)
    w.state.rule = parse_select(rule)
    parent = await w.scored(parent_text)
    return w, MinibatchGate(w.ctx, StrictImprovementAcceptance(), judges_ahead=False), parent


async def test_a_shorter_child_that_ties_is_kept_under_cheapest_within_not_under_best() -> None:
    for rule, kept in (("cheapest-within:0.02", True), ("best", False)):
        w, gate, parent = await _gate("- ant" + FILLER, rule)
        shorter = w.child("- ant", parent)
        assert await gate.gate(1, shorter, parent, MINIBATCH) == kept, rule
        (event,) = w.events.of("gate")
        assert event["child_score"] == event["parent_score"] == 1.0  # a tie on reward
        assert (shorter.candidate_id in w.state.contenders) == kept
        assert ("weighed" in event) == kept
        if kept:
            assert event["weighed"].startswith("a tie on reward, and prompt_tokens")


async def test_a_longer_child_that_ties_is_dropped_as_a_tie() -> None:
    w, gate, parent = await _gate("- ant", "cheapest-within:0.02")
    longer = w.child("- ant" + FILLER, parent)
    assert not await gate.gate(1, longer, parent, MINIBATCH)
    assert "weighed" not in w.events.of("gate")[0]


async def test_a_child_that_is_barely_shorter_is_not_a_gain() -> None:
    w, gate, parent = await _gate("- ant" + FILLER, "cheapest-within:0.02")
    assert not await gate.gate(1, w.child("- ant" + FILLER[:-2] + ")", parent), parent, MINIBATCH)


async def test_best_under_never_explores_a_child_over_the_bound_its_parent_was_under() -> None:
    w, gate, parent = await _gate("- ant", "best-under:tokens=20")
    better_but_long = w.child("- ant\n- bee" + FILLER, parent)
    assert not await gate.gate(1, better_but_long, parent, MINIBATCH)
    (event,) = w.events.of("gate")
    assert event["child_score"] > event["parent_score"]  # the criterion alone would accept it
    assert "over the bound 20" in event["weighed"]
    assert better_but_long.candidate_id not in w.state.contenders
    better_and_short = w.child("- ant\n- bee", parent)
    assert await gate.gate(2, better_and_short, parent, MINIBATCH)
    log = [Event(seq=n, run_id="r", type=t, data=d) for n, (t, d) in enumerate(w.events.events)]
    why = gepa_decisions(log)[better_but_long.candidate_id]
    assert any("; --select weighed it: prompt_tokens" in d["text"] for d in why)


async def test_over_the_bound_already_the_criterion_decides() -> None:
    w, gate, parent = await _gate("- ant" + FILLER, "best-under:tokens=20")
    assert await gate.gate(1, w.child("- ant\n- bee" + FILLER, parent), parent, MINIBATCH)


def test_an_unknown_value_leaves_the_criterions_verdict() -> None:
    w = wired()
    w.state.rule = parse_select("best-under:latency=100")  # no rollout measured any latency
    scores = ([{"ant-0": 1.0}], {"ant-0": 1.0})
    for accepted in (True, False):
        assert weigh(
            w.state, accepted, child="c", parents=["p"], scores=scores, seeds=["ant-0"]
        ) == (accepted, "")


async def test_a_shorter_tie_on_train_is_not_held_back_under_a_cost_rule() -> None:
    """Only deleting text and tying on train is an unproven deletion under ``best``; under
    ``cheapest-within`` it is the cheaper prompt the rule asks for."""
    for rule, held_back in (("best", True), ("cheapest-within:0.02", False)):
        w = wired()
        w.state.rule = parse_select(rule)
        parent = await w.scored("- ant" + FILLER)
        shorter = await w.scored("- ant", [parent])
        assert w.train.is_unproven_deletion(shorter, parent) == held_back, rule
    w = wired()
    w.state.rule = parse_select("cheapest-within:0.02")
    parent = await w.scored("- ant\n- bee" + FILLER)
    loses = await w.scored("- ant", [parent])  # shorter, but it lost the bee seeds
    assert w.train.is_unproven_deletion(loses, parent)
