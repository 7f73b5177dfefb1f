"""The minibatch gate (pure): does a child earn a full train evaluation?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["gate_total", "passes_gate", "ties"]


def gate_total(scores: Mapping[str, float | None], seeds: Sequence[str]) -> float:
    """Sum of rewards over ``seeds``; errored seeds (``None``/missing) add nothing."""
    return sum(v for s in seeds if (v := scores.get(s)) is not None)


def passes_gate(
    parents: Sequence[Mapping[str, float | None]],
    child: Mapping[str, float | None],
    seeds: Sequence[str],
) -> bool:
    """A child must beat its best parent strictly (a merge that only ties its parents adds
    nothing but a full train evaluation).

    Seeds where the child errored are compared only where both scored, so an
    infrastructure fault can neither pass nor fail a child on its own.
    """
    usable = [
        s for s in seeds if child.get(s) is not None and all(p.get(s) is not None for p in parents)
    ]
    if not usable:
        return False
    child_total = gate_total(child, usable)
    best_parent = max(gate_total(p, usable) for p in parents)
    return child_total > best_parent


def ties(
    parents: Sequence[Mapping[str, float | None]],
    child: Mapping[str, float | None],
    seeds: Sequence[str],
) -> bool:
    """The child scored exactly like its best parent on every seed both scored (no signal)."""
    usable = [
        s for s in seeds if child.get(s) is not None and all(p.get(s) is not None for p in parents)
    ]
    return any(all(abs((child[s] or 0.0) - (p[s] or 0.0)) < 1e-9 for s in usable) for p in parents)
