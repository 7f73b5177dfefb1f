"""The Python API: ``run_gepa(...)`` and ``run_mipro(...)`` for notebooks and scripts.

    from schemas import PromptTemplate, RunConfig
    from optimizer import run_mipro

    result = await run_mipro(
        PromptTemplate(system_prompt="Answer with a number.", user_template="{question}"),
        dataset="problems.jsonl",            # or a list of {"input": ..., "expected": ...}
        score="numeric",                     # a built-in verifier, a spec, or fn(task, result)
        task_model="gpt-4.1-mini",
        reflection_model="gpt-4.1",
        config=RunConfig(auto="light", seed=0),
    )
    result.best_template, result.final_population, result.history

The same functions take the prompt-optimization spec's arguments (``initial_template``,
``GEPAConfig``/``MIPROConfig``, ``endpoint``, ``mutation_endpoint``/``proposer_endpoint``,
``score_fn``, ``environment_factory``): :mod:`optimizer.api.spec` translates them into these.

The task runs where it always does, in a task container: either ``container=URL`` (one or a
list) or one built here from the template, the dataset, the score function and ``agent``
(a container target ``(task, candidate) -> output``; by default one chat completion of the
rendered template on ``task_model``), served on 127.0.0.1 inside this event loop. Everything
else is the runtime's: queue, cache, budget, workspace, heldout promotion and evidence.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from container import create_app, optimize
from container.chat import ChatTarget
from container.splits import Splits
from container.target import Registry
from optimizer.api.result import OptimizationResult, build_result
from optimizer.api.spec import (
    Endpoint,
    EnvironmentFactory,
    GEPAConfig,
    MIPROConfig,
    is_spec_call,
    spec_call,
)
from optimizer.gepa import GepaMethod
from optimizer.runtime.lifecycle.embedded import EmbeddedContainer
from optimizer.runtime.search.deps import ProposerLike
from optimizer.runtime.search.strategy import SearchMethod
from optimizer.searches import run_optimization
from schemas import PromptTemplate, RunConfig, UserError
from workspace import Workspace

__all__ = ["GEPA_PARTS", "run_gepa", "run_mipro"]

# The keyword arguments of ``run_gepa`` that take your own GEPA parts (``GepaMethod``'s).
GEPA_PARTS = ("candidate_selector", "component_selector", "acceptance", "merge", "stop_conditions")


async def run_gepa(
    initial_template: PromptTemplate | None = None,
    config: RunConfig | GEPAConfig | None = None,
    dataset: Any = None,
    endpoint: Endpoint | None = None,
    mutation_endpoint: Endpoint | None = None,
    score_fn: Callable[..., Any] | None = None,
    environment_factory: EnvironmentFactory | None = None,
    **kwargs: Any,
) -> OptimizationResult:
    """Optimize with GEPA (reflective prompt evolution), in either call style (module docstring).

    Your own parts replace those the config names: ``candidate_selector``,
    ``component_selector``, ``acceptance``, ``merge`` (objects satisfying the Protocols of
    :mod:`optimizer.gepa.strategies`), and ``stop_conditions`` (added to the built-in ones).
    """
    parts = {name: kwargs.pop(name) for name in GEPA_PARTS if name in kwargs}
    if parts:
        kwargs["search"] = GepaMethod(**parts)
    spec = {"endpoint": endpoint, "reflection_endpoint": mutation_endpoint, "score_fn": score_fn}
    spec["environment_factory"] = environment_factory
    return await _either("gepa", initial_template, config, dataset, spec, kwargs)


async def run_mipro(
    initial_template: PromptTemplate | None = None,
    config: RunConfig | MIPROConfig | None = None,
    dataset: Any = None,
    endpoint: Endpoint | None = None,
    proposer_endpoint: Endpoint | None = None,
    score_fn: Callable[..., Any] | None = None,
    environment_factory: EnvironmentFactory | None = None,
    **kwargs: Any,
) -> OptimizationResult:
    """Optimize with MIPRO (instructions x few-shot demos by TPE), in either call style."""
    spec = {"endpoint": endpoint, "reflection_endpoint": proposer_endpoint, "score_fn": score_fn}
    spec["environment_factory"] = environment_factory
    return await _either("mipro", initial_template, config, dataset, spec, kwargs)


async def _either(
    method: Literal["gepa", "mipro"],
    template: PromptTemplate | None,
    config: Any,
    dataset: Any,
    spec: dict[str, Any],
    kwargs: dict[str, Any],
) -> OptimizationResult:
    """The spec style is translated by ``spec_call`` into the keyword style: one code path."""
    if not is_spec_call(config, spec):
        return await _optimize(method, template, config=config, dataset=dataset, **kwargs)
    async with spec_call(
        method, initial_template=template, config=config, dataset=dataset, extra=kwargs, **spec
    ) as arguments:
        return await _optimize(method, arguments.pop("template"), **arguments)


async def _optimize(
    method: Literal["gepa", "mipro"],
    template: PromptTemplate | None,
    *,
    config: RunConfig | None = None,
    container: str | Sequence[str] | None = None,
    dataset: str | Path | Sequence[Mapping[str, Any]] | None = None,
    score: Any = None,
    agent: Callable[..., Any] | None = None,
    splits: str | Path | Splits | None = None,
    task_model: str | None = None,
    task_base_url: str | None = None,
    task_api_key_env: str = "OPENAI_API_KEY",
    reflection_model: str | None = None,
    reflection_base_url: str | None = None,
    program_id: str = "python-api",
    description: str = "",
    workspace: Workspace | str | Path = ".gepa",
    proposer: ProposerLike | None = None,
    on_event: Callable[..., None] | None = None,
    search: SearchMethod | None = None,
) -> OptimizationResult:
    """One run of the keyword style: against ``container`` URLs, or the template served here."""
    cfg = _api_config(method, config, container, task_model, reflection_model, reflection_base_url)
    async with _Workspace(workspace) as ws:
        run = functools.partial(
            run_optimization, workspace=ws, proposer=proposer, on_event=on_event, method=search
        )
        if container is not None:
            urls = [container] if isinstance(container, str) else list(container)
            result = await run(cfg.model_copy(update={"containers": urls}))
        else:
            template = _served_template(template, dataset, agent, task_model)
            target = agent or ChatTarget(
                model=str(task_model), base_url=task_base_url, api_key_env=task_api_key_env
            )
            try:
                app = _app(
                    template,
                    ws,
                    dataset,
                    score,
                    target,
                    splits,
                    task_model,
                    program_id,
                    description,
                )
                async with EmbeddedContainer(cfg, app=app) as url:
                    result = await run(cfg.model_copy(update={"containers": [url]}))
            finally:
                if isinstance(target, ChatTarget):
                    await target.aclose()
        return await build_result(method, template, result, ws)


def _api_config(
    method: Literal["gepa", "mipro"],
    config: RunConfig | None,
    container: str | Sequence[str] | None,
    task_model: str | None,
    reflection_model: str | None,
    reflection_base_url: str | None,
) -> RunConfig:
    """The run config: ``config`` (or the defaults) with the keyword arguments over it."""
    base = config or RunConfig()
    update: dict[str, Any] = {"method": method}
    if reflection_model:
        update.update(reflection_model=reflection_model, reflection_base_url=reflection_base_url)
    if task_model and container is not None:
        update["task_model"] = task_model
    if not (base.max_metric_calls or base.auto):
        update["auto"] = "light"
    cfg = base.model_copy(update=update)
    if not cfg.reflection_model:
        raise UserError("run_gepa/run_mipro need reflection_model= (or config.reflection_model)")
    return cfg


def _served_template(
    template: PromptTemplate | None,
    dataset: Any,
    agent: Callable[..., Any] | None,
    task_model: str | None,
) -> PromptTemplate:
    """Without ``container=``, the template is served here: what that needs, named."""
    if template is None:
        raise UserError("give a PromptTemplate (first argument) or container=URL")
    if dataset is None:
        raise UserError("give dataset= (a JSONL/JSON/CSV path or a list of rows) or container=URL")
    if agent is None and not task_model:
        raise UserError("give task_model= (the student model) or agent= (your own target)")
    return template


def _app(
    template: PromptTemplate,
    ws: Workspace,
    dataset: Any,
    score: Any,
    agent: Callable[..., Any],
    splits: Any,
    task_model: str | None,
    program_id: str,
    description: str,
) -> Any:
    path = _dataset_path(ws, dataset)
    optimize(
        id=program_id,
        description=description,
        baseline=template,
        verifier=score,
        dataset=path,
        version=f"student={task_model}" if task_model else "",
        registry=Registry(),
    )(agent)
    return create_app(agent.__gepa_target__, splits=splits)  # type: ignore[attr-defined]


def _dataset_path(ws: Workspace, dataset: Any) -> Path:
    if isinstance(dataset, str | Path):
        return Path(dataset)
    rows = [dict(row) for row in dataset]
    for i, row in enumerate(rows):
        row.setdefault("name", f"row-{i:05d}")
    text = "\n".join(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = ws.root / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.jsonl"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path


class _Workspace:
    """An open workspace: the caller's, or one opened (and closed) here."""

    def __init__(self, workspace: Workspace | str | Path) -> None:
        self._given = workspace if isinstance(workspace, Workspace) else None
        # A str stays a str: a postgresql:// URL is no path (Path() would fold its "//").
        self._target = None if isinstance(workspace, Workspace) else workspace
        self._owned: Workspace | None = None

    async def __aenter__(self) -> Workspace:
        if self._given is not None:
            return self._given
        self._owned = Workspace(self._target or ".gepa")
        await self._owned.open()
        return self._owned

    async def __aexit__(self, *exc: object) -> None:
        if self._owned is not None:
            await self._owned.close()
