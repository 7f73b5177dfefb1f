"""The prompt-optimization spec's call style, translated onto the one runtime.

    result = await run_gepa(
        initial_template=template, config=GEPAConfig(...), dataset=rows,
        endpoint=Endpoint(provider="openai", model="gpt-4o-mini"),
        mutation_endpoint=Endpoint(provider="openai", model="gpt-4o-mini"),
        score_fn=score_fn,                       # (trajectory, sample) -> Score
        environment_factory=None,                # or lambda sample: CalculatorEnvironment()
    )

``optimizer.run_gepa`` / ``run_mipro`` accept this style and the keyword one; ``spec_call``
turns the spec's arguments into the keyword ones (rows, splits, target, verifier, config) so
both run the same ``optimizer.api.optimize`` code: an embedded task container on 127.0.0.1, the
runtime's queue, cache, budget, search, heldout promotion and evidence. ``evaluate_template``
scores one template on some rows through the container SDK's own rollout path, in process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from container.dataset import Dataset
from container.program import build_served_program
from container.rollout import run_rollout
from container.splits import Splits
from container.target import Registry, optimize
from container.task import Task
from optimizer.api.spec.agent import EnvironmentFactory, endpoint_target, score_verifier
from optimizer.api.spec.config import Endpoint, GEPAConfig, MIPROConfig, run_config, seed_splits
from optimizer.api.spec.rows import find_label_column, row_name, spec_rows
from schemas import PromptTemplate, RolloutRequest, RunConfig, UserError

__all__ = ["evaluate_template", "is_spec_call", "spec_call"]

SPEC_ONLY = ("endpoint", "reflection_endpoint", "score_fn", "environment_factory")


def is_spec_call(config: Any, given: Mapping[str, Any]) -> bool:
    """True when the arguments are the spec's (a spec config, an Endpoint or a score_fn)."""
    spec_config = isinstance(config, GEPAConfig | MIPROConfig)
    return spec_config or any(given.get(name) is not None for name in SPEC_ONLY)


@contextlib.asynccontextmanager
async def spec_call(
    method: str,
    *,
    initial_template: PromptTemplate | None,
    config: GEPAConfig | MIPROConfig | RunConfig | None,
    dataset: Any,
    endpoint: Endpoint | None,
    reflection_endpoint: Endpoint | None,
    score_fn: Callable[..., Any] | None,
    environment_factory: EnvironmentFactory | None,
    extra: Mapping[str, Any],
) -> AsyncIterator[dict[str, Any]]:
    """The keyword arguments of ``optimizer.api.optimize`` for a spec call; closes the student after."""
    reflection_arg = "mutation_endpoint" if method == "gepa" else "proposer_endpoint"
    _require(initial_template, "initial_template", "a PromptTemplate")
    _require(endpoint, "endpoint", "an Endpoint (the student model)")
    _require(reflection_endpoint, reflection_arg, "an Endpoint (the model that writes prompts)")
    _require(score_fn, "score_fn", "a function (trajectory, sample) -> Score")
    assert initial_template is not None and endpoint is not None  # for the type checker
    assert reflection_endpoint is not None and score_fn is not None
    rows = _rows(dataset)
    wanted = GEPAConfig if method == "gepa" else MIPROConfig
    spec = config if isinstance(config, GEPAConfig | MIPROConfig) else wanted()
    if not isinstance(spec, wanted):
        raise UserError(
            f"run_{method} takes config={wanted.__name__}(...), not {type(spec).__name__}"
        )
    label = find_label_column(rows, initial_template, spec.label_column)
    student = endpoint.checked("endpoint")
    reflection = reflection_endpoint.checked(reflection_arg)
    base = run_config(spec, len(rows)) if not isinstance(config, RunConfig) else config
    target = endpoint_target(student, environment_factory)
    try:
        yield {
            "template": initial_template,
            "config": base.model_copy(update={"reflection_api_key_env": reflection.key_env()}),
            "dataset": spec_rows(rows, initial_template, label),
            "splits": _splits(spec, len(rows)),
            "score": score_verifier(score_fn),
            "agent": target,
            "task_model": student.model,
            "reflection_model": reflection.model,
            "reflection_base_url": reflection.base_url(),
            **extra,
        }
    finally:
        await target.aclose()


async def evaluate_template(
    template: PromptTemplate,
    seeds: Sequence[int],
    dataset: Sequence[Mapping[str, Any]],
    endpoint: Endpoint,
    score_fn: Callable[..., Any],
    environment_factory: EnvironmentFactory | None = None,
    max_concurrent: int = 10,
    *,
    label_column: str | None = None,
) -> PromptTemplate:
    """The template with ``score`` = its mean reward on the rows ``seeds`` (in process).

    Each row runs through the container SDK's rollout path (render, student, ``score_fn``),
    as it would in a served container; a model fault propagates.
    """
    rows = _rows(dataset)
    label = find_label_column(rows, template, label_column)
    tasks = tuple(
        Task(name=r["name"], input=r["input"], expected=r["expected"])
        for r in spec_rows(rows, template, label)
    )
    names = [row_name(_index(i, len(rows))) for i in seeds]
    registry = Registry()
    student = endpoint_target(endpoint.checked("endpoint"), environment_factory)
    optimize(id="evaluate-template", baseline=template, registry=registry)(student)
    served = build_served_program(
        registry.get("evaluate-template"),
        dataset=Dataset(tasks=tasks),
        splits=Splits(train=tuple(dict.fromkeys(names))),
        verifier=score_verifier(score_fn),
    )
    limit = asyncio.Semaphore(max(1, max_concurrent))
    components = template.to_components()

    async def one(name: str) -> float:
        async with limit:
            request = RolloutRequest(candidate=components, seed=name)
            return (await run_rollout(served, request)).reward

    try:
        rewards = await asyncio.gather(*(one(n) for n in names))
    finally:
        await student.aclose()
    score = sum(rewards) / len(rewards) if rewards else None
    return template.model_copy(update={"score": score})


def _rows(dataset: Any) -> list[Mapping[str, Any]]:
    if dataset is None or isinstance(dataset, str | bytes) or not isinstance(dataset, Sequence):
        raise UserError(
            "dataset= must be a list of row dicts such as "
            '[{"query": ..., "intent": ...}] (seeds are their indices)'
        )
    return list(dataset)


def _splits(spec: GEPAConfig | MIPROConfig, rows: int) -> Splits | None:
    seeds = seed_splits(spec, rows)
    if seeds is None:
        return None
    return Splits(
        train=tuple(map(row_name, seeds.train)),
        val=tuple(map(row_name, seeds.val)),
        holdout=tuple(map(row_name, seeds.holdout)),
    )


def _index(value: Any, rows: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < rows:
        raise UserError(f"seed {value!r} is not a row index of the dataset (0..{rows - 1})")
    return value


def _require(value: Any, name: str, what: str) -> None:
    if value is None:
        raise UserError(f"{name}= is missing: give {what}")
