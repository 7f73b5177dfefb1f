"""The batch samplers: which train seeds a proposal is shown and gated on."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

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
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import lineage_state, search_for
from tests.optimizer.gepa.runs import LABELS, release_when_both_asked, whole_run

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


async def test_sequential_run_shows_the_parents_train_failures_and_pays_no_rollout_twice(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await whole_run(tmp_path, container, proposer, proposals_in_flight=1)
    assert result.promoted
    assert max(container.calls.values()) == 1  # no (content, seed) reached the container twice
    first = proposer.seen[0]
    minibatch = {e.seed for e in first.evaluations}
    context = {e.seed for e in first.train_evaluations}
    # Other failures from the baseline's cached train evaluation (no rollout paid), bounded so
    # that the gate can extend onto every one of them.
    assert context and not context & minibatch
    assert len(context) == CONTEXT_PER_MINIBATCH * len(minibatch)
    assert all(e.reward == 0.0 and "expected" in e.feedback for e in first.train_evaluations)


async def test_proposals_in_flight_at_once_are_shown_different_failures(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    watcher = release_when_both_asked(proposer)
    await whole_run(tmp_path, container, proposer, proposals_in_flight=2)
    await asyncio.wait_for(watcher, 5)
    a, b = (
        {e.seed for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:2]
    )
    # Twelve failing seeds are enough for two disjoint views: no failure is shown twice.
    assert a and b and not a & b


async def test_proposals_in_flight_are_shown_different_kinds_of_failure(tmp_path: Path) -> None:
    # Two train seeds per label fail with the same feedback ("expected <label>"): one fix
    # repairs both. Siblings shown different seeds of one label would write one fix twice.
    labels = [f"{name}{i}" for name in ("ant", "bee", "cat") for i in range(4)]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    watcher = release_when_both_asked(proposer)
    await whole_run(tmp_path, container, proposer, proposals_in_flight=2, max_metric_calls=150)
    await asyncio.wait_for(watcher, 5)
    a, b = (
        {e.feedback for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:2]
    )
    assert len(a) >= 3 and len(b) >= 3
    assert not a & b  # 12 kinds of failure are enough for two disjoint views


async def test_writers_at_the_same_time_split_the_kinds_of_failure_between_them(
    tmp_path: Path,
) -> None:
    # Six kinds of failure (two seeds each) and three writers asked at once: two kinds each,
    # none shown twice, so the wave's three edits fix three different things.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    holds = [proposer.hold(n) for n in (1, 2, 3)]

    async def release() -> None:
        while len(proposer.seen) < 3:
            await asyncio.sleep(0.01)
        for hold in holds:
            hold.set()

    releaser = asyncio.create_task(release())
    await whole_run(tmp_path, container, proposer, proposals_in_flight=3, max_metric_calls=150)
    await asyncio.wait_for(releaser, 5)
    views = [
        {e.feedback for e in r.evaluations + r.train_evaluations if e.reward == 0.0}
        for r in proposer.seen[:3]
    ]
    assert [len(v) for v in views] == [2, 2, 2]
    assert len(set().union(*views)) == 6
