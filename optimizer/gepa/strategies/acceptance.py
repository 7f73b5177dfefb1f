"""Acceptance criterion: does a child beat its parent on the seeds it was scored on?

GEPA gates each child on a minibatch before it earns a full train evaluation, and the
criterion is the rule the gate applies (``--acceptance``):

- ``strict_improvement`` (the default, GEPA's): the child's total must beat its best
  parent's strictly; a merge that only ties its parents adds nothing but a train evaluation;
- ``improvement_or_equal``: a tie is accepted too (lateral moves, as gepa-ai offers).

A criterion returns a :data:`Verdict`: ``ACCEPT``, ``REJECT``, or ``UNDECIDED`` when the
seeds say nothing either way (a tie under the strict rule); the gate then scores both on more
of the failures the proposal was shown (``optimizer.gepa.gate``) and asks again. Totals count
only the seeds every candidate scored: a seed where one errored can neither pass nor fail a
child on its own. The same criterion judges a stack of several children on the whole train
split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "ACCEPTANCE_CRITERIA",
    "ACCEPT",
    "REJECT",
    "UNDECIDED",
    "AcceptanceCriterion",
    "ImprovementOrEqualAcceptance",
    "Scores",
    "StrictImprovementAcceptance",
    "Verdict",
    "margin",
    "total",
]

Scores = Mapping[str, float | None]  # seed -> reward (None: the rollout errored)
Verdict = Literal["accept", "reject", "undecided"]
ACCEPT: Verdict = "accept"
REJECT: Verdict = "reject"
UNDECIDED: Verdict = "undecided"
EPS = 1e-9


def total(scores: Scores, seeds: Sequence[str]) -> float:
    """Sum of rewards over ``seeds``; errored seeds (``None``/missing) add nothing."""
    return sum(v for s in seeds if (v := scores.get(s)) is not None)


def margin(parents: Sequence[Scores], child: Scores, seeds: Sequence[str]) -> float | None:
    """The child's total minus its best parent's over the seeds all of them scored (``None``
    when there are none)."""
    usable = [
        s for s in seeds if child.get(s) is not None and all(p.get(s) is not None for p in parents)
    ]
    if not usable:
        return None
    return total(child, usable) - max(total(p, usable) for p in parents)


@runtime_checkable
class AcceptanceCriterion(Protocol):
    """Judges a child against its parents on the seeds both were scored on."""

    def judge(self, parents: Sequence[Scores], child: Scores, seeds: Sequence[str]) -> Verdict:
        """``ACCEPT``, ``REJECT`` or ``UNDECIDED`` (more seeds are needed)."""
        ...


class StrictImprovementAcceptance:
    """The child must beat its best parent's total strictly; a tie is undecided.

    A tie says nothing: the child scored like its parent seed for seed (it may have fixed a
    failure shown outside the minibatch), or it gained some seeds and lost as many (a fix
    whose noisy student slipped, or an edit that trades one rule's seeds for a look-alike's).
    """

    def judge(self, parents: Sequence[Scores], child: Scores, seeds: Sequence[str]) -> Verdict:
        """See the class docstring."""
        m = margin(parents, child, seeds)
        if m is None or abs(m) < EPS:
            return UNDECIDED
        return ACCEPT if m > 0 else REJECT


class ImprovementOrEqualAcceptance:
    """The child must score at least its best parent's total; with no seed both scored,
    undecided."""

    def judge(self, parents: Sequence[Scores], child: Scores, seeds: Sequence[str]) -> Verdict:
        """See the class docstring."""
        m = margin(parents, child, seeds)
        if m is None:
            return UNDECIDED
        return ACCEPT if m > -EPS else REJECT


ACCEPTANCE_CRITERIA = ("strict_improvement", "improvement_or_equal")
