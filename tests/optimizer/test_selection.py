"""Ranking candidates under a ``--select`` rule, and the frontier over objectives (pure)."""

from __future__ import annotations

import pytest

from optimizer.runtime.search.selection import (
    Point,
    check_rule,
    non_dominated,
    rank_candidates,
)
from schemas import RunConfig, SelectRule, UserError, parse_select


def _p(cid: str, reward: float, cost: float | None, tokens: float, latency: float = 1.0) -> Point:
    return Point(cid, reward, {"cost_usd": cost, "prompt_tokens": tokens, "latency_ms": latency})


POINTS = [
    _p("base", 0.50, 0.001, 10),
    _p("long", 0.95, 0.009, 90),
    _p("mid", 0.94, 0.004, 40),
    _p("short", 0.93, 0.003, 30),
    _p("odd", 0.94, None, 20),
]


def test_best_ranks_by_reward_and_keeps_creation_order_on_ties() -> None:
    ranking = rank_candidates(SelectRule(), POINTS)
    assert [r.candidate_id for r in ranking.order] == ["long", "mid", "odd", "short", "base"]
    assert ranking.chosen == "long" and all(r.eligible for r in ranking.order)


def test_cheapest_within_picks_the_cheapest_close_to_the_best() -> None:
    ranking = rank_candidates(parse_select("cheapest-within:0.02"), POINTS)
    # within 0.02 of 0.95: long, mid, short, odd; by cost, an unknown cost last
    assert ranking.eligible() == ["short", "mid", "long", "odd"] and ranking.by == "cost_usd"
    assert ranking.order[-1].candidate_id == "base" and not ranking.order[-1].eligible
    assert "more than 0.02 below" in ranking.order[-1].reason
    assert rank_candidates(parse_select("cheapest-within:0"), POINTS).chosen == "long"
    assert rank_candidates(parse_select("cheapest-within:1"), POINTS).chosen == "base"


def test_cheapest_within_falls_back_to_prompt_length_without_any_cost() -> None:
    unpriced = [_p(p.candidate_id, p.reward, None, p.objectives["prompt_tokens"]) for p in POINTS]
    ranking = rank_candidates(parse_select("cheapest-within:0.02"), unpriced)
    assert ranking.by == "prompt_tokens" and ranking.chosen == "odd"


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        ("best-under:tokens=40", "mid"),
        ("best-under:tokens=30", "odd"),
        ("best-under:cost=0.0035", "short"),
        ("best-under:cost=0.01", "long"),
        ("best-under:latency=0.5", None),
    ],
)
def test_best_under_is_the_best_that_meets_the_bound(spec: str, chosen: str | None) -> None:
    ranking = rank_candidates(parse_select(spec), POINTS)
    assert ranking.chosen == chosen
    rule = parse_select(spec)
    for ranked in ranking.order:
        point = next(p for p in POINTS if p.candidate_id == ranked.candidate_id)
        value = point.value(str(rule.objective))
        assert ranked.eligible == (value is not None and value <= rule.bound)


def test_an_unknown_cost_never_meets_a_cost_bound() -> None:
    out = {
        r.candidate_id: r for r in rank_candidates(parse_select("best-under:cost=1"), POINTS).order
    }
    assert not out["odd"].eligible and out["odd"].reason == "cost_usd unknown"


def test_the_rule_parses_with_a_fix_in_every_error() -> None:
    assert parse_select("best") == SelectRule()
    assert parse_select(" cheapest-within:0.05 ").delta == 0.05
    rule = parse_select("best-under:latency=800")
    assert (rule.objective, rule.bound, str(rule)) == (
        "latency_ms",
        800.0,
        "best-under:latency=800",
    )
    assert parse_select("best-under:toxicity=0.1").objective == "toxicity"
    for bad in ("cheapest", "cheapest-within:x", "best-under:cost", "best-under:cost=-1", "best:1"):
        with pytest.raises(ValueError, match="--select best"):
            parse_select(bad)
    with pytest.raises(ValueError, match="select"):
        RunConfig(select="cheapest-within:lots")
    assert RunConfig(select="best-under:tokens=300").select_rule().bound == 300


def test_a_bound_must_be_on_a_minimised_objective_of_the_run() -> None:
    directions = {"reward": "maximize", "exact": "maximize", "cost_usd": "minimize"}
    check_rule(parse_select("best-under:cost=1"), directions)
    with pytest.raises(UserError, match="no objective 'toxicity'"):
        check_rule(parse_select("best-under:toxicity=1"), directions)
    with pytest.raises(UserError, match="'exact' is maximised"):
        check_rule(parse_select("best-under:exact=1"), directions)


def test_the_frontier_keeps_what_nothing_beats_on_every_axis() -> None:
    axes = {"reward": "maximize", "cost_usd": "minimize"}
    # odd has no cost: no place on this frontier; mid is beaten by nothing (cheaper than long,
    # better than short)
    assert non_dominated(POINTS, axes) == ["base", "long", "mid", "short"]
    tokens = {"reward": "maximize", "prompt_tokens": "minimize"}
    assert non_dominated(POINTS, tokens) == ["base", "long", "odd"]
    same = [_p("a", 0.5, 0.1, 1), _p("b", 0.5, 0.1, 1)]
    assert non_dominated(same, axes) == ["a", "b"]
