"""Weighing what the team weighs while the search runs: the ``--select`` rule at the gate.

Under ``--select best`` (the default) nothing here changes a verdict. Under another rule the
gate asks two more things of each child, after the acceptance criterion has judged it on
reward:

- *a tie on reward is not a loss*: a child whose total equals its best parent's on the seeds
  both scored is accepted when it is better on the rule's objective by at least
  :data:`MIN_GAIN` of that parent's value: cheaper for ``cheapest-within`` (the student's
  ``cost_usd``, or ``prompt_tokens`` when no cost is known, as the ranking does) and lower on
  the bounded objective for ``best-under``. The rule would choose such a child over its
  parent, so it becomes a contender and a parent instead of being dropped as a tie;
- *a child the rule can never choose is not explored*: under ``best-under``, a child whose
  mean on the gate's seeds is over the bound while its parent's is within it is not
  accepted, however it scores;
- *a shorter prompt at equal reward is proof enough*: a child that only deleted text is
  normally held back unless it beats its parent on train (``optimizer.gepa.train_stage``);
  one that loses nothing on the train seeds and is better on the rule's objective
  (:func:`proven_by_rule`) is what the rule asks for, and is not held back.

A value comes from the run's objective table (:mod:`optimizer.runtime.search.objectives`),
over the gate's seeds; ``prompt_tokens`` is the candidate's own length. Where a value is
unknown, the criterion's verdict stands. Every verdict this changes says why in the gate
event (``weighed``), which ``runs why`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from optimizer.gepa.strategies.acceptance import EPS, Scores, margin
from optimizer.runtime.accounts.objectives import prompt_tokens
from optimizer.runtime.search.state import SearchState

__all__ = ["MIN_GAIN", "proven_by_rule", "weigh"]

MIN_GAIN = 0.01  # a child must be at least 1% cheaper (shorter, faster) than its parent


def _value(state: SearchState, candidate_id: str, name: str, seeds: Sequence[str]) -> float | None:
    if name == "prompt_tokens":
        known = state.objectives.tokens.get(candidate_id)
        record = state.candidates.get(candidate_id)
        if known is None and record is not None:
            known = prompt_tokens(record.components)
        return None if known is None else float(known)
    return state.objectives.means(candidate_id, seeds).get(name)


def _weighed_objective(state: SearchState, ids: Sequence[str], seeds: Sequence[str]) -> str:
    rule = state.rule
    if rule.kind == "best-under":
        return str(rule.objective)
    costs = [_value(state, cid, "cost_usd", seeds) for cid in ids]
    return "cost_usd" if all(c is not None for c in costs) else "prompt_tokens"


def weigh(
    state: SearchState,
    accepted: bool,
    *,
    child: str,
    parents: Sequence[str],
    scores: tuple[Sequence[Scores], Scores],
    seeds: Sequence[str],
) -> tuple[bool, str]:
    """The gate's verdict under the run's rule, and why when it differs from ``accepted``
    (the criterion's). ``scores`` is the parents' rewards and the child's on ``seeds``."""
    rule = state.rule
    if rule.is_best or not parents:
        return accepted, ""
    name = _weighed_objective(state, [child, *parents], seeds)
    mine = _value(state, child, name, seeds)
    theirs = [v for p in parents if (v := _value(state, p, name, seeds)) is not None]
    if mine is None or len(theirs) < len(parents):
        return accepted, ""
    best = min(theirs)
    if rule.kind == "best-under" and accepted and mine > rule.bound + EPS >= best:
        return (
            False,
            f"{name} {mine:.4g} is over the bound {rule.bound:g} (its parent's {best:.4g})",
        )
    m = margin(*scores, seeds)
    if (
        not accepted
        and m is not None
        and abs(m) < EPS
        and (why := _better(state, child, parents, seeds))
    ):
        return True, f"a tie on reward, and {why}"
    return accepted, ""


def _better(state: SearchState, child: str, parents: Sequence[str], seeds: Sequence[str]) -> str:
    """Why ``child`` is better than every parent on the rule's objective ("" when it is not,
    or a value is unknown)."""
    name = _weighed_objective(state, [child, *parents], seeds)
    mine = _value(state, child, name, seeds)
    theirs = [v for p in parents if (v := _value(state, p, name, seeds)) is not None]
    if mine is None or len(theirs) < len(parents) or mine > min(theirs) * (1 - MIN_GAIN) - EPS:
        return ""
    return f"{name} {mine:.4g} against its parent's {min(theirs):.4g}"


def proven_by_rule(state: SearchState, child: str, parent: str) -> bool:
    """Whether ``child``, scored on train, scores at least its parent's total on the train
    seeds both scored and is better on the rule's objective (never under ``best``)."""
    mine, theirs = state.train.get(child, {}), state.train.get(parent, {})
    seeds = [x for x in state.train_seeds if x in mine and x in theirs]
    if state.rule.is_best or not seeds:
        return False
    m = margin([theirs], mine, seeds)
    return m is not None and m > -EPS and bool(_better(state, child, [parent], seeds))
