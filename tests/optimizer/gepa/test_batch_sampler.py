"""The batch samplers: which train seeds a proposal is shown and gated on."""

from __future__ import annotations

import random

from optimizer.gepa.ledger import FailureLedger
from optimizer.gepa.strategies.batch_sampler import (
    CONTEXT_PER_MINIBATCH,
    BatchRequest,
    BatchSampler,
    EpochShuffledBatchSampler,
    FailuresFirstBatchSampler,
    one_of_each,
)
from optimizer.runtime.search.minibatch import MinibatchSampler
from tests.optimizer.gepa.parts import lineage_state, search_for

FAILING = [f"{k}-{i}" for k in ("ant", "bee", "cow") for i in range(3)]  # three kinds, 3 each
PASSING = [f"cat-{i}" for i in range(6)]
SCORES = {"parent": {**dict.fromkeys(FAILING, 0.0), **dict.fromkeys(PASSING, 1.0)}}
ROTATION = ["cat-0", "ant-0", "cat-1", "cat-2"]


def _sampler_and_ledger(in_flight: int = 1) -> tuple[FailuresFirstBatchSampler, FailureLedger, str]:
    state, ids = lineage_state(SCORES, {})
    search = search_for(state, proposals_in_flight=in_flight)
    search._ledger._kinds[ids["parent"]] = {s: f"kind:{s[:3]}" for s in FAILING}
    sampler = search._s.batch_sampler
    assert isinstance(sampler, FailuresFirstBatchSampler)
    return sampler, search._ledger, ids["parent"]


def _request(parent: str, rotation: list[str] = ROTATION, **fields: object) -> BatchRequest:
    scores = SCORES["parent"]
    return BatchRequest(parent, rotation, tuple(scores), scores, **fields)  # type: ignore[arg-type]


def test_half_the_minibatch_is_the_parents_failures_half_seeds_it_passes() -> None:
    sampler, ledger, parent = _sampler_and_ledger()
    batch = sampler.sample(_request(parent), ledger, random.Random(0))
    assert len(batch.minibatch) == len(ROTATION)
    failures = [s for s in batch.minibatch if s in FAILING]
    assert len(failures) == 2 and len({s[:3] for s in failures}) == 2  # two kinds, not one twice
    assert [s for s in batch.minibatch if s in PASSING] == ["cat-0", "cat-1"]  # rotation order
    assert set(batch.context) <= set(FAILING) and not set(batch.context) & set(batch.minibatch)
    assert len(batch.context) <= CONTEXT_PER_MINIBATCH * len(ROTATION)


def test_kinds_shown_to_proposals_in_flight_are_split_between_them() -> None:
    sampler, ledger, parent = _sampler_and_ledger(in_flight=3)
    kinds = []
    for _ in range(3):
        batch = sampler.sample(_request(parent, in_flight=3), ledger, random.Random(0))
        shown = ledger.take(parent, batch.minibatch, batch.context, accepting=False)
        assert shown is not None
        kinds.append({s[:3] for s in batch.minibatch if s in FAILING})
    assert kinds[0] and all(len(k) == 1 for k in kinds)
    assert set().union(*kinds) == {"ant", "bee", "cow"}  # each proposal its own kind


def test_a_follow_up_is_shown_what_its_parent_broke_first() -> None:
    sampler, ledger, parent = _sampler_and_ledger()
    batch = sampler.sample(_request(parent, broken=("cow-2",)), ledger, random.Random(0))
    assert batch.minibatch[0] == "cow-2"


def test_a_seed_still_being_scored_is_not_taken_for_a_passing_one() -> None:
    sampler, ledger, parent = _sampler_and_ledger()
    batch = sampler.sample(_request(parent, unscored={"cat-0"}), ledger, random.Random(0))
    assert "cat-0" not in batch.minibatch


def test_a_parent_not_scored_on_train_is_shown_its_rotation() -> None:
    sampler, ledger, parent = _sampler_and_ledger()
    request = BatchRequest(parent, ROTATION, tuple(SCORES["parent"]), None)
    batch = sampler.sample(request, ledger, random.Random(0))
    assert batch.minibatch == ROTATION and batch.context == []


def test_epoch_shuffled_shows_the_rotation_as_it_comes() -> None:
    seeds = [f"s{i}" for i in range(10)]
    sampler = EpochShuffledBatchSampler(MinibatchSampler(seeds, 4, random.Random(0)))
    assert isinstance(sampler, BatchSampler) and sampler.size == 4
    rotation = sampler.next_rotation()
    _, ledger, parent = _sampler_and_ledger()
    batch = sampler.sample(_request(parent, rotation=rotation), ledger, random.Random(0))
    assert batch.minibatch == rotation and batch.context == []


def test_every_seed_comes_once_per_epoch() -> None:
    seeds = [f"s{i}" for i in range(8)]
    sampler = FailuresFirstBatchSampler(MinibatchSampler(seeds, 4, random.Random(0)))
    epoch = sampler.next_rotation() + sampler.next_rotation()
    assert sorted(epoch) == sorted(seeds)


def test_one_of_each_kind_comes_before_any_repeat() -> None:
    kinds = {"x1": "k1", "x2": "k1", "y1": "k2"}
    assert one_of_each(["x1", "x2", "y1", "z"], kinds) == ["x1", "y1", "z", "x2"]
