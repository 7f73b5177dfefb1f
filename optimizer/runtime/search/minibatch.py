"""Rotating minibatches over the train seeds (GEPA's epoch-shuffled sampler)."""

from __future__ import annotations

import random
from collections.abc import Container, Sequence

__all__ = ["MinibatchSampler"]


class MinibatchSampler:
    """Shuffles the train seeds once per epoch and hands out consecutive slices.

    Every seed is seen once per epoch, so no seed is starved; the injected ``rng`` makes
    the sequence reproducible for a given ``--seed``. ``skip`` is a live view of seeds no
    longer handed out (the state's ``set_aside``: seeds that failed for two candidates).
    """

    def __init__(
        self, seeds: Sequence[str], size: int, rng: random.Random, skip: Container[str] = ()
    ) -> None:
        if not seeds:
            raise ValueError("no train seeds to sample minibatches from")
        self._seeds = list(seeds)
        self._size = max(1, min(size, len(self._seeds)))
        self._rng = rng
        self._skip = skip
        self._order: list[str] = []

    @property
    def size(self) -> int:
        """Seeds per minibatch: ``size`` capped by the train split."""
        return self._size

    def next(self) -> list[str]:
        """The next minibatch of ``size`` distinct seeds (fewer when too few are left)."""
        self._order = [s for s in self._order if s not in self._skip]
        if len(self._order) < self._size:
            fresh = [s for s in self._seeds if s not in self._skip]
            self._rng.shuffle(fresh)
            rest = [s for s in fresh if s not in self._order]
            self._order.extend(rest)
        batch, self._order = self._order[: self._size], self._order[self._size :]
        return batch
