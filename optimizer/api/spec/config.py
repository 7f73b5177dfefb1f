"""The spec API's ``Endpoint``, ``GEPAConfig`` and ``MIPROConfig``, mapped onto one ``RunConfig``.

The prompt-optimization spec describes GEPA as generations of a population; the runtime runs
the same search as reflect-and-gate steps under a metric-call budget. ``run_config`` makes
the spec's numbers mean that budget (``docs/spec-api.md`` has the table):

- GEPA: ``generations x population_size`` children is the proposal budget P, turned into
  metric calls by the ``--auto`` formula; ``crossover_rate`` is the share of P that may be
  merges (``use_merge``/``max_merges``); ``elite_size`` is how many top candidates are
  re-scored on the val seeds (``holdout_top_k``); ``max_concurrent`` is ``concurrency``.
  ``mutation_rate`` has no knob: every child that is not a merge is one reflective mutation.
- MIPRO: ``num_candidates`` instructions, demo sets of up to ``max_bootstrapped_demos +
  max_labeled_demos``, ``num_trials`` minibatches of ``minibatch_size`` (plus the periodic
  full evaluations) as the budget.

Seeds are row indices of the dataset. Rows in neither ``train_seeds`` nor ``val_seeds`` (nor
``holdout_seeds`` when given) are the holdout the lift is measured on; without any seeds the
runtime's stratified 60/20/20 split is used. When every row is a train or val seed, the run
goes as the spec says: the winner is chosen on val (on train without val seeds) and the lift
is measured there too (``lift_without_holdout``), which the result and the report say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optimizer.runtime.accounts.budget import auto_metric_calls
from schemas import RunConfig, UserError

__all__ = ["Endpoint", "GEPAConfig", "MIPROConfig", "SeedSplits", "run_config", "seed_splits"]

_PROVIDERS = {
    "openai": (None, "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
}


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat model: ``provider``, ``model`` and where to reach it.

    ``api_base`` points at any OpenAI-compatible server (vLLM, llama.cpp, a local proxy);
    the key is read from the environment variable ``api_key_env`` (by default the
    provider's), never stored.
    """

    provider: str = "openai"
    model: str = ""
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512

    def base_url(self) -> str | None:
        """The API base: ``api_base``, else the provider's (``UserError`` naming the fix)."""
        if self.api_base:
            return self.api_base
        if self.provider not in _PROVIDERS:
            raise UserError(
                f"Endpoint(provider={self.provider!r}) needs api_base= (the URL of its "
                f"OpenAI-compatible API); known providers without one: {', '.join(_PROVIDERS)}"
            )
        return _PROVIDERS[self.provider][0]

    def key_env(self) -> str:
        """The environment variable holding the key."""
        return self.api_key_env or _PROVIDERS.get(self.provider, (None, "OPENAI_API_KEY"))[1]

    def checked(self, argument: str) -> Endpoint:
        """Itself, or a ``UserError`` when it names no model."""
        if not self.model:
            raise UserError(f"{argument}=Endpoint(...) needs model=, e.g. 'gpt-4o-mini'")
        self.base_url()
        return self


@dataclass(frozen=True)
class GEPAConfig:
    """GEPA hyperparameters as the spec names them (mapping in the module docstring)."""

    population_size: int = 20
    generations: int = 10
    mutation_rate: float = 0.3
    crossover_rate: float = 0.5
    elite_size: int = 4
    train_seeds: tuple[int, ...] = ()
    val_seeds: tuple[int, ...] = ()
    max_concurrent: int = 10
    # gepa-runtime's own: where the lift is measured, the label column, the run's knobs.
    holdout_seeds: tuple[int, ...] = ()
    label_column: str | None = None
    minibatch_size: int = 4
    seed: int = 0
    max_metric_calls: int | None = None
    runtime: dict[str, Any] = field(default_factory=dict)  # any other RunConfig field


@dataclass(frozen=True)
class MIPROConfig:
    """MIPRO hyperparameters as the spec names them (mapping in the module docstring)."""

    num_candidates: int = 50
    num_trials: int = 100
    max_bootstrapped_demos: int = 4
    max_labeled_demos: int = 4
    minibatch_size: int = 35
    train_seeds: tuple[int, ...] = ()
    val_seeds: tuple[int, ...] = ()
    # gepa-runtime's own, as for GEPAConfig.
    holdout_seeds: tuple[int, ...] = ()
    label_column: str | None = None
    num_demo_sets: int = 6
    full_eval_every: int = 5
    max_concurrent: int = 10
    seed: int = 0
    max_metric_calls: int | None = None
    runtime: dict[str, Any] = field(default_factory=dict)


SpecConfig = GEPAConfig | MIPROConfig


@dataclass(frozen=True)
class SeedSplits:
    """Row indices per split; ``None`` when the runtime's default split applies."""

    train: tuple[int, ...]
    val: tuple[int, ...]
    holdout: tuple[int, ...]


def seed_splits(config: SpecConfig, rows: int) -> SeedSplits | None:
    """The splits the seeds name, checked against the dataset (``UserError`` naming the field)."""
    named = {"train_seeds": config.train_seeds, "val_seeds": config.val_seeds}
    named["holdout_seeds"] = config.holdout_seeds
    if not any(named.values()):
        return None
    if not config.train_seeds:
        raise UserError("give train_seeds= (row indices) when val_seeds or holdout_seeds are set")
    seen: dict[int, str] = {}
    for name, seeds in named.items():
        for index in seeds:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < rows:
                raise UserError(
                    f"{name} has {index!r}, not a row index of the dataset (0..{rows - 1}); "
                    "seeds are positions in the dataset list"
                )
            if index in seen:
                raise UserError(
                    f"row {index} is in both {seen[index]} and {name}; a row belongs to one split"
                )
            seen[index] = name
    holdout = config.holdout_seeds or tuple(i for i in range(rows) if i not in seen)
    return SeedSplits(tuple(config.train_seeds), tuple(config.val_seeds), tuple(holdout))


def run_config(config: SpecConfig, rows: int) -> RunConfig:
    """The ``RunConfig`` the spec's config means for a dataset of ``rows`` rows."""
    splits = seed_splits(config, rows)
    if splits is None:  # the runtime's default split: 60 / 20 / 20
        val = holdout = int(0.2 * rows + 0.5)
        train = max(1, rows - val - holdout)
    else:
        train, val, holdout = len(splits.train), len(splits.val), len(splits.holdout)
    common: dict[str, Any] = {
        "concurrency": config.max_concurrent,
        "minibatch_size": config.minibatch_size,
        "seed": config.seed,
        "lift_without_holdout": True,  # the spec validates on val_seeds; holdout is optional
    }
    if isinstance(config, GEPAConfig):
        knobs = _gepa(config, train=train, val=val, holdout=holdout)
    else:
        knobs = _mipro(config, train=train, val=val, holdout=holdout)
    try:
        return RunConfig(**{**common, **knobs, **config.runtime})
    except ValueError as exc:  # pydantic's message names the field
        raise UserError(f"{type(config).__name__}: {exc}") from None


def _gepa(config: GEPAConfig, *, train: int, val: int, holdout: int) -> dict[str, Any]:
    proposals = config.population_size * config.generations
    if proposals < 1:
        raise UserError("GEPAConfig: population_size x generations must be at least 1")
    m = min(config.minibatch_size, train)
    budget = (
        auto_metric_calls(
            "light", train=train, holdout=holdout, val=val, minibatch=m, top_k=config.elite_size
        )
        + (proposals - 12) * (m + math.ceil(train / 2))  # light is P = 12
    )
    merges = round(config.crossover_rate * proposals)
    return {
        "method": "gepa",
        "max_metric_calls": config.max_metric_calls or budget,
        "use_merge": merges > 0,
        "max_merges": merges,
        "holdout_top_k": max(1, config.elite_size),
    }


def _mipro(config: MIPROConfig, *, train: int, val: int, holdout: int) -> dict[str, Any]:
    m = min(config.minibatch_size, train)
    full = math.ceil(config.num_trials / config.full_eval_every)
    budget = train + holdout + config.num_trials * m + full * train + holdout + 2 * val
    return {
        "method": "mipro",
        "max_metric_calls": config.max_metric_calls or budget,
        "num_instructions": config.num_candidates,
        "max_demos": config.max_bootstrapped_demos + config.max_labeled_demos,
        "num_demo_sets": config.num_demo_sets,
        "full_eval_every": config.full_eval_every,
    }
