"""The candidate selectors: which candidate the next proposal starts from."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from optimizer.gepa.strategies.candidate_selector import (
    CandidateSelector,
    CurrentBestCandidateSelector,
    EpsilonGreedyCandidateSelector,
    ParetoCandidateSelector,
    SelectionView,
    TopKParetoCandidateSelector,
)
from optimizer.runtime.search.frontier import build_frontier
from optimizer.runtime.search.state import SearchState
from tests.optimizer.gepa.parts import lineage_state, search_for

SEEDS = ("a", "b", "c", "d", "e", "f")
# ``wide`` wins five seeds with a mean of 5/6; ``best`` one seed with 0.9 everywhere; ``mid``
# nothing (dominated by wide): the best by mean is not the widest winner.
SCORES = {
    "base": dict.fromkeys(SEEDS, 0.0),
    "wide": {"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0},
    "best": dict.fromkeys(SEEDS, 0.9),
    "mid": {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0, "e": 0.0, "f": 0.0},
}


def _view(state: SearchState, **fields: object) -> SelectionView:
    return SelectionView(frontier=state.frontier, ranked=tuple(state.ranked()), **fields)  # type: ignore[arg-type]


def _state() -> tuple[SearchState, dict[str, str]]:
    parents = {name: ["base"] for name in SCORES if name != "base"}
    return lineage_state(SCORES, parents)


def _draws(selector: CandidateSelector, view: SelectionView, n: int = 2000) -> Counter[str]:
    rng = random.Random(7)
    return Counter(selector.select(view, rng) for _ in range(n))


def test_pareto_draws_frontier_members_by_the_seeds_they_win() -> None:
    state, ids = _state()
    draws = _draws(ParetoCandidateSelector(), _view(state))
    assert set(draws) == {ids["wide"], ids["best"]}  # mid and base win nothing
    assert draws[ids["wide"]] / draws[ids["best"]] == pytest.approx(5.0, rel=0.25)


def test_pareto_halves_a_members_weight_per_repeated_text_and_skips_exhausted_members() -> None:
    state, ids = _state()
    repeated = _draws(ParetoCandidateSelector(), _view(state, repeats={ids["wide"]: 2}))
    assert repeated[ids["wide"]] / repeated[ids["best"]] == pytest.approx(5 / 4, rel=0.25)
    spared = _draws(ParetoCandidateSelector(), _view(state, exhausted=frozenset({ids["wide"]})))
    assert set(spared) == {ids["best"]}
    everyone = frozenset({ids["wide"], ids["best"]})
    assert set(_draws(ParetoCandidateSelector(), _view(state, exhausted=everyone))) == set(everyone)


def test_pareto_takes_an_unasked_best_first_and_still_draws() -> None:
    # The best nobody was shown yet goes first; the draw is made all the same, so the rng
    # moves as in a run where the best was drawn.
    state, ids = _state()
    view = _view(state, unasked=frozenset({ids["best"], ids["wide"]}))
    rng, twin = random.Random(3), random.Random(3)
    assert ParetoCandidateSelector().select(view, rng) == ids["best"]
    ParetoCandidateSelector().select(_view(state), twin)
    assert rng.random() == twin.random()


def test_a_new_best_is_shown_before_a_parent_is_drawn() -> None:
    # Through the search: nobody was shown the best's failures yet, so it goes first though
    # by seeds won this rng draws the wide member.
    state, ids = lineage_state(
        {k: SCORES[k] for k in ("base", "wide", "best")}, {"wide": ["base"], "best": ["base"]}
    )
    wins = state.frontier.wins(solved=True)
    assert (len(wins[ids["best"]]), len(wins[ids["wide"]])) == (1, 5)
    assert search_for(state)._parent() == ids["best"]


def test_current_best_always_takes_the_best_train_mean() -> None:
    state, ids = _state()
    assert set(_draws(CurrentBestCandidateSelector(), _view(state))) == {ids["best"]}
    empty = SearchState(train_seeds=SEEDS)
    with pytest.raises(ValueError, match="evaluate the baseline"):
        CurrentBestCandidateSelector().select(_view(empty), random.Random(0))


def test_epsilon_greedy_explores_with_probability_epsilon() -> None:
    state, ids = _state()
    assert set(_draws(EpsilonGreedyCandidateSelector(0.0), _view(state))) == {ids["best"]}
    explored = _draws(EpsilonGreedyCandidateSelector(1.0), _view(state))
    assert set(explored) == set(ids.values())  # every fully evaluated candidate, frontier or not
    some = _draws(EpsilonGreedyCandidateSelector(0.4), _view(state))
    # the best by the greedy 60% plus its quarter of the 40% drawn uniformly among four
    assert some[ids["best"]] / 2000 == pytest.approx(0.6 + 0.4 / 4, abs=0.04)
    rest = _draws(
        EpsilonGreedyCandidateSelector(1.0), _view(state, exhausted=frozenset({ids["mid"]}))
    )
    assert ids["mid"] not in rest
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonGreedyCandidateSelector(1.5)


def test_top_k_pareto_draws_only_among_the_k_best_means() -> None:
    state, ids = _state()
    # by mean: best 0.9, wide 5/6, mid 1/3, base 0
    assert set(_draws(TopKParetoCandidateSelector(1), _view(state))) == {ids["best"]}
    assert set(_draws(TopKParetoCandidateSelector(2), _view(state))) == {ids["best"], ids["wide"]}
    # none of the top k on the frontier: the best
    narrow = build_frontier(
        {ids["wide"]: SCORES["wide"]}, SEEDS, [ids["wide"]]
    )  # a frontier the best is not on
    view = SelectionView(frontier=narrow, ranked=tuple(state.ranked()))
    assert TopKParetoCandidateSelector(1).select(view, random.Random(0)) == ids["best"]
    with pytest.raises(ValueError, match="k must be"):
        TopKParetoCandidateSelector(0)


def test_a_users_own_object_is_a_candidate_selector() -> None:
    class Oldest:
        def select(self, view: SelectionView, rng: random.Random) -> str:
            return view.ranked[-1][0]

    assert isinstance(Oldest(), CandidateSelector)
    state, ids = _state()
    assert Oldest().select(_view(state), random.Random(0)) == ids["base"]
