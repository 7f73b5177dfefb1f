"""Batch sampler: which train seeds a proposal is shown and its child is gated on.

Each iteration takes the next slice of the epoch-shuffled train seeds (its *rotation*: every
seed once per epoch, as gepa-ai's ``EpochShuffledBatchSampler``); the sampler turns it into
the proposal's minibatch and its *context* (other failures shown briefly, onto which the gate
extends a tie). ``--batch-sampling`` chooses:

- ``failures_first`` (the default): half the minibatch is the parent's own failures (its train
  rollouts are cached, so choosing them costs nothing and gives the reflection something to
  fix), half seeds it passes from the rotation (they catch regressions); proposals written at
  the same time are shown different kinds of failure;
- ``epoch_shuffled``: the rotation as it comes, no context (gepa-ai's plain minibatch).

Any object with ``size``, ``next_rotation()`` and ``sample(request, ledger, rng)`` is a
batch sampler.
"""

from __future__ import annotations

import random
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from optimizer.gepa.context import SearchContext
from optimizer.gepa.ledger import FailureLedger
from optimizer.runtime.search.minibatch import MinibatchSampler

__all__ = [
    "BATCH_SAMPLERS",
    "CONTEXT_PER_MINIBATCH",
    "Batch",
    "BatchRequest",
    "BatchSampler",
    "EpochShuffledBatchSampler",
    "FailuresFirstBatchSampler",
    "one_of_each",
    "request_for",
]

# Other failing train seeds shown briefly to the proposer, per minibatch seed (the gate's
# extension onto them is bounded by it).
CONTEXT_PER_MINIBATCH = 2


@dataclass(frozen=True)
class BatchRequest:
    """What a batch is chosen for.

    ``scores`` are the parent's train rewards when it was scored on every train seed
    (``None`` otherwise); ``unscored`` the train seeds still being scored for the baseline
    (not known to pass); ``broken`` the seeds a lateral child broke (its follow-up is shown
    them first); ``share`` splits the unshown kinds with the proposals in flight
    (``in_flight`` of them at most, ``open_proposals`` being written now).
    """

    parent_id: str
    rotation: list[str]
    train_seeds: tuple[str, ...]
    scores: Mapping[str, float] | None
    unscored: Container[str] = frozenset()
    broken: Sequence[str] = ()
    share: bool = True
    in_flight: int = 1


@dataclass(frozen=True)
class Batch:
    """A proposal's minibatch (scored for it and its gate) and its context (shown briefly)."""

    minibatch: list[str]
    context: list[str]


def request_for(
    ctx: SearchContext,
    parent_id: str,
    rotation: list[str],
    broken: Sequence[str] = (),
    *,
    share: bool = True,
) -> BatchRequest:
    """The request for a batch on ``parent_id`` in the search ``ctx`` describes."""
    state = ctx.deps.state
    return BatchRequest(
        parent_id,
        rotation,
        state.train_seeds,
        state.train.get(parent_id),
        unscored=ctx.unscored,
        broken=broken,
        share=share,
        in_flight=ctx.in_flight,
    )


@runtime_checkable
class BatchSampler(Protocol):
    """Chooses the seeds each proposal is shown and gated on."""

    @property
    def size(self) -> int:
        """Seeds per minibatch."""
        ...

    def next_rotation(self) -> list[str]:
        """The next slice of the epoch-shuffled train seeds; once per iteration, under the
        search's lock (it draws from the run's ``random.Random``)."""
        ...

    def sample(self, request: BatchRequest, ledger: FailureLedger, rng: random.Random) -> Batch:
        """The minibatch and context of one proposal."""
        ...


def one_of_each(seeds: Sequence[str], kind: Mapping[str, str]) -> list[str]:
    """``seeds`` reordered so that the first seed of every kind comes before any repeat."""
    firsts: list[str] = []
    repeats: list[str] = []
    seen: set[str] = set()
    for s in seeds:
        k = kind.get(s, s)
        (repeats if k in seen else firsts).append(s)
        seen.add(k)
    return firsts + repeats


class EpochShuffledBatchSampler:
    """The rotation as the minibatch; no context."""

    def __init__(self, rotation: MinibatchSampler) -> None:
        self._rotation = rotation

    @property
    def size(self) -> int:
        """Seeds per minibatch."""
        return self._rotation.size

    def next_rotation(self) -> list[str]:
        """See :class:`BatchSampler`."""
        return self._rotation.next()

    def sample(self, request: BatchRequest, ledger: FailureLedger, rng: random.Random) -> Batch:
        """See the class docstring."""
        return Batch(list(request.rotation), [])


class FailuresFirstBatchSampler(EpochShuffledBatchSampler):
    """Half the parent's failures, kinds not taken first; half seeds it passes."""

    def sample(self, request: BatchRequest, ledger: FailureLedger, rng: random.Random) -> Batch:
        """The minibatch (half failures of the parent, half successes) and other failures.

        Proposals written at the same time are shown different failures where there are
        enough, so they write different fixes; the context is bounded so that the gate can
        extend onto all of it. A parent not scored on every train seed is shown its rotation.
        """
        scores, rotation = request.scores, request.rotation
        if scores is None:
            return Batch(rotation, [])
        size = len(rotation)
        failing = [s for s in request.train_seeds if scores.get(s, 1.0) < 1.0]
        rng.shuffle(failing)
        kind = ledger.kinds_of(request.parent_id)
        taken = {s: (ledger.taken[kind.get(s, s)] > 0, ledger.taken[s] > 0) for s in failing}
        failing = one_of_each(failing, kind)  # stable sorts below: varied kinds come first
        failing.sort(key=lambda s: taken[s])  # kinds not taken, then seeds not taken
        found_nothing = ledger.later_round_kinds(request.parent_id)
        failing.sort(key=lambda s: kind.get(s, s) in found_nothing)
        failing.sort(key=lambda s: s not in request.broken)  # a follow-up: what its parent broke
        all_failing = set(failing)
        if request.share:
            failing = self._share_of(request, ledger, failing, kind, taken, found_nothing)
        fresh = [s for s in failing if not any(taken[s])]
        chosen = failing[: min(len(failing), -(-size // 2))]
        passing = [s for s in rotation if s not in all_failing and s not in request.unscored]
        rest = passing + [s for s in failing if s not in chosen]  # failing: fresh kinds first
        minibatch = chosen + rest[: size - len(chosen)]
        pool = [s for s in (fresh or failing) if s not in minibatch]
        return Batch(minibatch, pool[: CONTEXT_PER_MINIBATCH * size])

    @staticmethod
    def _share_of(
        request: BatchRequest,
        ledger: FailureLedger,
        failing: list[str],
        kind: Mapping[str, str],
        taken: Mapping[str, tuple[bool, bool]],
        found_nothing: set[str],
    ) -> list[str]:
        """The failures of this proposal's share of the kinds nobody in flight was shown.

        Proposals written at the same time split the kinds not taken between them
        (``failing`` lists them first): with ten kinds and four proposals, 3 + 3 + 2 + 2, so
        that each wave fixes as many different things as it has proposals, and the stack of
        their edits gains one fix per proposal. One that finds every kind taken is shown all
        of them, as a proposal alone is. In a later round, the kinds an answer found nothing
        in are not shared out: once the others are taken, a proposal is shown all, the
        others first, and asks again what an erring answer spoilt.
        """
        workers = request.in_flight
        kinds = {kind.get(s, s): taken[s][0] for s in failing}
        open_kinds = [k for k, is_taken in kinds.items() if not is_taken and k not in found_nothing]
        if workers <= 1 or not open_kinds:
            return failing
        free = max(1, workers - ledger.open_proposals)
        mine = set(open_kinds[: -(-len(open_kinds) // free)])  # what a follow-up broke first
        return [s for s in failing if kind.get(s, s) in mine]


BATCH_SAMPLERS = ("failures_first", "epoch_shuffled")
