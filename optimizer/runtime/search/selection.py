"""Ranking candidates by what the team weighs (pure): a ``--select`` rule, and the frontier.

:func:`rank_candidates` orders candidates under a :class:`schemas.SelectRule`; the first
*eligible* one is the rule's choice. Each candidate is a :class:`Point`: its mean reward and
the means of its other objectives (``cost_usd``, ``latency_ms``, ``prompt_tokens`` and the
container's, ``None`` where unknown), all measured on the same seeds.

- ``best``: every candidate is eligible, by reward, highest first.
- ``cheapest-within:DELTA``: eligible when its reward is at least the best reward less
  ``DELTA``; the eligible ones by ``cost_usd``, cheapest first (an unknown cost after every
  known one). When no eligible candidate has a known cost (an unpriced or local student),
  ``prompt_tokens`` stands in for it: ``Ranking.by`` says which was used.
- ``best-under:OBJECTIVE=BOUND``: eligible when its ``OBJECTIVE`` is known and at most
  ``BOUND``; the eligible ones by reward, highest first.

Ties keep the order the points were given in (creation order); ineligible candidates follow
the eligible ones, by reward, each with the reason it is out. :func:`non_dominated` is the
frontier over objectives: the candidates no other candidate beats on every axis.

The search may rank with these functions while it runs; promotion uses them to pick the
winner (:mod:`optimizer.runtime.results.promotion`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from schemas import Direction, SelectRule, UserError

__all__ = ["Point", "Ranked", "Ranking", "check_rule", "non_dominated", "rank_candidates"]

EPS = 1e-9


@dataclass(frozen=True)
class Point:
    """One candidate's means: ``reward`` and every other objective (``None``: unknown)."""

    candidate_id: str
    reward: float
    objectives: Mapping[str, float | None]

    def value(self, name: str) -> float | None:
        """An objective's mean, ``reward`` included."""
        return self.reward if name == "reward" else self.objectives.get(name)


@dataclass(frozen=True)
class Ranked:
    """A candidate's place under a rule: eligible, or out for ``reason``."""

    candidate_id: str
    eligible: bool
    reason: str = ""


@dataclass(frozen=True)
class Ranking:
    """Candidates under a rule, the rule's choice first; ``by`` is the objective that ordered
    the eligible ones (``reward``, ``cost_usd`` or ``prompt_tokens`` standing in for it)."""

    order: tuple[Ranked, ...]
    by: str = "reward"

    @property
    def chosen(self) -> str | None:
        """The rule's choice: the first eligible candidate (``None``: none is)."""
        return next((r.candidate_id for r in self.order if r.eligible), None)

    def eligible(self) -> list[str]:
        """The eligible candidates in rank order."""
        return [r.candidate_id for r in self.order if r.eligible]


def check_rule(rule: SelectRule, directions: Mapping[str, Direction]) -> None:
    """``UserError`` when the rule bounds an objective the run has not, or one maximised."""
    name = rule.objective
    if rule.kind != "best-under" or name is None:
        return
    if name not in directions:
        known = ", ".join(n for n, d in directions.items() if d == "minimize")
        raise UserError(
            f"--select {rule}: the run has no objective {name!r}; best-under bounds cost, "
            f"latency, tokens or a minimised objective of the container (here: {known})"
        )
    if directions[name] != "minimize":
        raise UserError(
            f"--select {rule}: {name!r} is maximised (GET /program), so a bound from above "
            "means nothing; bound a minimised objective, or choose with --select best"
        )


def _by_reward(points: Sequence[Point]) -> list[Point]:
    order = {p.candidate_id: i for i, p in enumerate(points)}
    return sorted(points, key=lambda p: (-p.reward, order[p.candidate_id]))


def rank_candidates(rule: SelectRule, points: Sequence[Point]) -> Ranking:
    """``points`` ranked under ``rule`` (rules in the module docstring)."""
    ranked = _by_reward(points)
    if rule.kind == "best" or not points:
        return Ranking(tuple(Ranked(p.candidate_id, True) for p in ranked))
    if rule.kind == "cheapest-within":
        return _cheapest_within(rule.delta, ranked)
    return _best_under(str(rule.objective), rule.bound, ranked)


def _cheapest_within(delta: float, ranked: list[Point]) -> Ranking:
    floor = ranked[0].reward - delta - EPS
    inside = [p for p in ranked if p.reward >= floor]
    out = [p for p in ranked if p.reward < floor]
    by = "cost_usd" if any(p.value("cost_usd") is not None for p in inside) else "prompt_tokens"
    order = {p.candidate_id: i for i, p in enumerate(ranked)}

    def key(p: Point) -> tuple[bool, float, int]:
        value = p.value(by)
        return (value is None, value if value is not None else 0.0, order[p.candidate_id])

    reason = f"more than {delta:g} below the best reward {ranked[0].reward:.4g}"
    return Ranking(
        tuple(
            [Ranked(p.candidate_id, True) for p in sorted(inside, key=key)]
            + [Ranked(p.candidate_id, False, reason) for p in out]
        ),
        by=by,
    )


def _best_under(name: str, bound: float, ranked: list[Point]) -> Ranking:
    def why_out(p: Point) -> str:
        value = p.value(name)
        if value is None:
            return f"{name} unknown"
        if value > bound * (1 + EPS) + EPS:
            return f"{name} {value:.4g} > {bound:g}"
        return ""

    reasons = {p.candidate_id: why_out(p) for p in ranked}
    inside = [Ranked(p.candidate_id, True) for p in ranked if not reasons[p.candidate_id]]
    out = [
        Ranked(p.candidate_id, False, reasons[p.candidate_id])
        for p in ranked
        if reasons[p.candidate_id]
    ]
    return Ranking(tuple(inside + out))


def _dominates(a: Point, b: Point, axes: Mapping[str, Direction]) -> bool:
    better = False
    for name, direction in axes.items():
        va, vb = a.value(name), b.value(name)
        assert va is not None and vb is not None
        if direction == "minimize":
            va, vb = -va, -vb
        if va < vb - EPS:
            return False
        if va > vb + EPS:
            better = True
    return better


def non_dominated(points: Sequence[Point], axes: Mapping[str, Direction]) -> list[str]:
    """The candidates on the frontier over ``axes`` (name -> direction), in the given order:
    no other candidate is at least as good on every axis and better on one. A candidate
    with an unknown value on an axis has no place on it and is left out."""
    placed = [p for p in points if all(p.value(n) is not None for n in axes)]
    return [
        p.candidate_id
        for p in placed
        if not any(_dominates(q, p, axes) for q in placed if q is not p)
    ]
