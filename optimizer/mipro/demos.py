"""Few-shot demo candidates for MIPRO (pure functions, tested without I/O).

Bootstrapped demos are the baseline's own answers on train seeds that the verifier scored
as correct: the (input, output) pair of a rollout with ``reward >= threshold``. Labelled
demos are train examples with the dataset's label as output. The inputs and labels come
from the ``{"type": "task"}`` event the container SDK puts in every rollout trace (labels
only on train seeds); a container that sends none simply yields no demos.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import Demo, RolloutRecord

__all__ = ["TaskInfo", "bootstrap_demos", "build_demo_sets", "labelled_demos", "task_info"]


@dataclass(frozen=True)
class TaskInfo:
    """A seed's input and, on train seeds, its label, as the container reported them."""

    seed: str
    input: Any
    expected: Any = None


def task_info(record: RolloutRecord) -> TaskInfo | None:
    """The task event of a rollout's trace, or None when the container sent none."""
    for event in record.trace.get("events", ()):
        if isinstance(event, Mapping) and event.get("type") == "task" and "input" in event:
            return TaskInfo(record.seed, event["input"], event.get("expected"))
    return None


def _as_output(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def bootstrap_demos(
    records: Iterable[RolloutRecord], *, threshold: float = 1.0
) -> list[tuple[str, Demo]]:
    """(seed, demo) for every ok rollout scored ``>= threshold`` whose input is known."""
    demos = []
    for record in records:
        if record.status != "ok" or record.reward is None or record.reward < threshold:
            continue
        if record.output is None or _as_output(record.output).strip() == "":
            continue
        info = task_info(record)
        if info is not None:
            demos.append((record.seed, Demo(input=info.input, output=_as_output(record.output))))
    return demos


def labelled_demos(
    infos: Iterable[TaskInfo], *, exclude: Iterable[str] = ()
) -> list[tuple[str, Demo]]:
    """(seed, demo) with the dataset's label as output, for seeds not in ``exclude``."""
    skip = set(exclude)
    return [
        (info.seed, Demo(input=info.input, output=_as_output(info.expected)))
        for info in infos
        if info.expected is not None and info.seed not in skip
    ]


def build_demo_sets(
    bootstrapped: Sequence[Demo],
    labelled: Sequence[Demo],
    *,
    count: int,
    max_demos: int,
    rng: random.Random,
) -> list[tuple[Demo, ...]]:
    """Up to ``count`` distinct demo sets; set 0 is always the empty one (zero-shot).

    Then, as in DSPy's MIPRO: the bootstrapped demos in order, the labelled ones in order,
    and random mixes that put verified-correct demos first and fill with labelled ones.
    """
    sets: list[tuple[Demo, ...]] = [()]
    if max_demos <= 0:
        return sets

    def add(demos: Sequence[Demo]) -> None:
        chosen = tuple(demos[:max_demos])
        if chosen and chosen not in sets and len(sets) < count:
            sets.append(chosen)

    add(bootstrapped)
    add(labelled)
    pool_b, pool_l = list(bootstrapped), list(labelled)
    for _ in range(count * 4):
        if len(sets) >= count or not (pool_b or pool_l):
            break
        rng.shuffle(pool_b)
        rng.shuffle(pool_l)
        take = rng.randint(0, min(len(pool_b), max_demos)) if pool_b else 0
        add(pool_b[:take] + pool_l[: max_demos - take])
    return sets
