"""The adaptive reserve: what the end of a run still needs, from the search state (pure)."""

from __future__ import annotations

from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.promotion import choose_on_train, could_still_win, selection_need
from optimizer.runtime.search.state import SearchState
from schemas import CandidateRecord, candidate_id_for, content_hash

TRAIN = ("t1", "t2", "t3", "t4")
HOLDOUT = tuple(f"h{i}" for i in range(10))
VAL = ("v1", "v2", "v3")


def _state(*texts: str) -> tuple[SearchState, list[str]]:
    state, ids = SearchState(train_seeds=TRAIN), []
    for text in texts:
        comps = {"p": text}
        cid = candidate_id_for(comps)
        state.add(
            CandidateRecord(
                run_id="r",
                candidate_id=cid,
                content_hash=content_hash(comps),
                components=comps,
                origin="seed" if not ids else "mutation",
                parents=ids[:1],
            )
        )
        ids.append(cid)
    return state, ids


def test_nothing_is_reserved_while_no_child_could_win() -> None:
    state, (base,) = _state("base")
    state.set_train(base, dict.fromkeys(TRAIN, 0.5))
    assert selection_need(state, RunPlan(TRAIN, HOLDOUT), base) == 0


def test_the_winners_holdout_is_reserved_from_the_first_passing_gate() -> None:
    state, (base, child) = _state("base", "child")
    state.set_train(base, dict.fromkeys(TRAIN, 0.5))
    state.contenders.add(child)  # passed a minibatch gate; its train evaluation not booked yet
    assert selection_need(state, RunPlan(TRAIN, HOLDOUT), base) == len(HOLDOUT)
    state.set_train(child, dict.fromkeys(TRAIN, 1.0))
    assert selection_need(state, RunPlan(TRAIN, HOLDOUT), base) == len(HOLDOUT)
    state.holdout[child] = dict.fromkeys(HOLDOUT, 1.0)  # already measured: nothing left
    assert selection_need(state, RunPlan(TRAIN, HOLDOUT), base) == 0


def test_val_selection_reserves_the_frontier_it_will_score_and_the_winners_holdout() -> None:
    state, (base, a, b) = _state("base", "a", "b")
    state.set_train(base, {"t1": 1.0, "t2": 0.0, "t3": 0.0, "t4": 0.0})
    state.set_train(a, {"t1": 0.0, "t2": 1.0, "t3": 1.0, "t4": 0.0})
    state.set_train(b, {"t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 1.0})
    plan = RunPlan(TRAIN, HOLDOUT, VAL, top_k=2)
    # Top 2 of the frontier by train mean (a, then base) plus the baseline: 2 on val, then
    # the winner on holdout. Only what was chosen, not the whole frontier (b is third).
    assert selection_need(state, plan, base) == 2 * len(VAL) + len(HOLDOUT)
    state.val[a] = dict.fromkeys(VAL, 1.0)
    assert selection_need(state, plan, base) == len(VAL) + len(HOLDOUT)


def test_a_partial_candidate_that_wins_only_its_gate_seeds_is_not_chosen() -> None:
    # Scored on 2 of 4 train seeds (its gate's, where it beat its parent): 1.0 there beats the
    # best's 0.5 on the same seeds, but with the other two unknown it is not surely better.
    state, (base, best, partial) = _state("base", "best", "partial")
    state.set_train(base, dict.fromkeys(TRAIN, 0.0))
    state.set_train(best, dict.fromkeys(TRAIN, 0.5))
    state.partial[partial] = {"t1": 1.0, "t2": 1.0}
    assert choose_on_train(state, base) == best


def test_a_partial_candidate_better_even_at_its_worst_is_chosen() -> None:
    state, (base, best, partial) = _state("base", "best", "partial")
    state.set_train(base, dict.fromkeys(TRAIN, 0.0))
    state.set_train(best, dict.fromkeys(TRAIN, 0.25))
    state.partial[partial] = {"t1": 1.0, "t2": 1.0, "t3": 1.0}
    # Unscored t4 counted at the lowest reward seen (0.0): 0.75 > 0.25.
    assert choose_on_train(state, base) == partial


def test_a_child_scored_on_part_of_train_could_still_win_only_with_room_for_it() -> None:
    # Best mean 0.5 on 4 seeds, lowest reward seen 0. A child scored on 2 seeds reaches at most
    # 2 x 1.0 / 4 = 0.5 (not better); on 3 seeds, 0.75. A program whose rewards go up to 10
    # leaves room on 1 seed: 10 / 4 = 2.5.
    state, (base, best) = _state("base", "best")
    state.set_train(base, dict.fromkeys(TRAIN, 0.0))
    state.set_train(best, dict.fromkeys(TRAIN, 0.5))
    plan = RunPlan(TRAIN, HOLDOUT)
    assert not could_still_win(state, plan, 2)
    assert could_still_win(state, plan, 3) and could_still_win(state, plan, len(TRAIN))
    assert not could_still_win(
        state, RunPlan(TRAIN, HOLDOUT, VAL, top_k=2), 3
    )  # val: only full ones
    state.ceiling = 10.0
    assert could_still_win(state, plan, 1)
