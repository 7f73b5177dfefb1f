"""Every candidate's objectives, per seed and as means: what the search state keeps of them.

The rollout queue tells the table the results of every evaluation (paid or from the cache);
the table keeps each scored rollout's values (:func:`optimizer.runtime.accounts.objectives.
rollout_values`) on the seeds it counts, the train and holdout seeds, and each candidate's
``prompt_tokens``. ``means`` gives a candidate's mean of each objective over those seeds (an
errored rollout is in none; an unknown cost is left out of the cost's mean, and the mean is
``None`` when no rollout's cost is known). Replayed from the cache on a resume like every score.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from optimizer.runtime.accounts.objectives import StudentPricing, prompt_tokens, rollout_values
from optimizer.runtime.rollouts.records import SeedResult

__all__ = ["ObjectiveTable"]

Values = dict[str, float | None]


@dataclass
class ObjectiveTable:
    """Objective values per candidate and seed (``values[candidate][seed][name]``).

    ``seeds``: the seeds whose rollouts count (empty: every seed). ``pricing`` prices the
    student's usage.
    """

    pricing: StudentPricing = field(default_factory=StudentPricing)
    seeds: frozenset[str] = frozenset()
    values: dict[str, dict[str, Values]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    def observe(
        self, candidate_id: str, components: Mapping[str, str], results: Mapping[str, SeedResult]
    ) -> None:
        """Keep the scored rollouts of one evaluation (the queue's ``on_results``)."""
        self.tokens.setdefault(candidate_id, prompt_tokens(components))
        mine = self.values.setdefault(candidate_id, {})
        for seed, result in results.items():
            if result.reward is None or (self.seeds and seed not in self.seeds):
                continue
            mine[seed] = rollout_values(result.record, self.pricing)

    def drop_seed(self, seed: str) -> None:
        """Forget a seed set aside: it is in no mean."""
        for per_seed in self.values.values():
            per_seed.pop(seed, None)

    def per_seed(self, candidate_id: str, name: str) -> dict[str, float]:
        """``seed -> value`` of one objective for one candidate, where it is known."""
        if name == "prompt_tokens":
            count = self.tokens.get(candidate_id)
            seeds = self.values.get(candidate_id, {})
            return {} if count is None else dict.fromkeys(seeds, float(count))
        out: dict[str, float] = {}
        for seed, values in self.values.get(candidate_id, {}).items():
            value = values.get(name)
            if value is not None:
                out[seed] = value
        return out

    def means(self, candidate_id: str, seeds: Collection[str] | None = None) -> Values:
        """Mean of every objective over the candidate's seeds (``seeds``: only those), with
        ``prompt_tokens``; ``None`` for an objective no rollout of it knows."""
        rows = [
            v for s, v in self.values.get(candidate_id, {}).items() if seeds is None or s in seeds
        ]
        names = dict.fromkeys(n for row in rows for n in row)
        out: Values = {}
        for name in names:
            known = [row[name] for row in rows if row.get(name) is not None]
            out[name] = sum(known) / len(known) if known else None  # type: ignore[arg-type]
        count = self.tokens.get(candidate_id)
        out["prompt_tokens"] = None if count is None else float(count)
        return out

    def unknown_cost(self, candidate_id: str) -> int:
        """How many of the candidate's scored rollouts have no known cost."""
        return sum(
            1 for v in self.values.get(candidate_id, {}).values() if v.get("cost_usd") is None
        )
