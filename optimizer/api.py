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
    result.best_template, result.population, result.stats

The task runs where it always does, in a task container: either ``container=URL`` (one or a
list) or one built here from the template, the dataset, the score function and ``agent``
(a container target ``(task, candidate) -> output``; by default one chat completion of the
rendered template on ``task_model``), served on 127.0.0.1 inside this event loop. Everything
else is the runtime's: queue, cache, budget, workspace, heldout promotion and evidence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from container import create_app, optimize
from container.chat import ChatTarget
from container.target import Registry
from optimizer.embedded import EmbeddedContainer
from optimizer.run import RunResult, run_optimization
from optimizer.search import ProposerLike
from schemas import Event, PromptTemplate, RunConfig, TemplateError, UserError
from workspace import Workspace

__all__ = ["Member", "OptimizeResult", "run_gepa", "run_mipro"]


@dataclass(frozen=True)
class Member:
    """One candidate of the final population with its scores (None: not evaluated there)."""

    candidate_id: str
    origin: str
    parents: tuple[str, ...]
    components: Mapping[str, str]
    template: PromptTemplate | None
    train: float | None
    holdout: float | None
    minibatch: Mapping[str, float] | None


@dataclass(frozen=True)
class OptimizeResult:
    """What a run produced: the best template, the population, statistics, the evidence."""

    method: str
    best_template: PromptTemplate | None
    best_components: Mapping[str, str]
    promoted: bool
    lift: float
    population: tuple[Member, ...]
    stats: tuple[dict[str, Any], ...]  # per generation (GEPA iteration) or per MIPRO trial
    run: RunResult

    @property
    def evidence_dir(self) -> Path:
        """The run's folder with ``evidence.json`` and ``report.md``."""
        return self.run.evidence_dir


async def run_gepa(template: PromptTemplate | None = None, **kwargs: Any) -> OptimizeResult:
    """Optimize with GEPA (reflective prompt evolution); see the module docstring."""
    return await _optimize("gepa", template, **kwargs)


async def run_mipro(template: PromptTemplate | None = None, **kwargs: Any) -> OptimizeResult:
    """Optimize with MIPRO (instructions x few-shot demos by TPE); see the module docstring."""
    return await _optimize("mipro", template, **kwargs)


async def _optimize(
    method: Literal["gepa", "mipro"],
    template: PromptTemplate | None,
    *,
    config: RunConfig | None = None,
    container: str | Sequence[str] | None = None,
    dataset: str | Path | Sequence[Mapping[str, Any]] | None = None,
    score: Any = None,
    agent: Callable[..., Any] | None = None,
    splits: str | Path | None = None,
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
) -> OptimizeResult:
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
    async with _Workspace(workspace) as ws:
        if container is not None:
            urls = [container] if isinstance(container, str) else list(container)
            result = await run_optimization(
                cfg.model_copy(update={"containers": urls}),
                workspace=ws,
                proposer=proposer,
                on_event=on_event,
            )
        else:
            if template is None:
                raise UserError("give a PromptTemplate (first argument) or container=URL")
            if dataset is None:
                raise UserError(
                    "give dataset= (a JSONL/JSON/CSV path or a list of rows) or container=URL"
                )
            if agent is None and not task_model:
                raise UserError("give task_model= (the student model) or agent= (your own target)")
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
                    result = await run_optimization(
                        cfg.model_copy(update={"containers": [url]}),
                        workspace=ws,
                        proposer=proposer,
                        on_event=on_event,
                    )
            finally:
                if isinstance(target, ChatTarget):
                    await target.aclose()
        return await _result(method, template, result, ws)


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


async def _result(
    method: str, template: PromptTemplate | None, run: RunResult, ws: Workspace
) -> OptimizeResult:
    packet = run.evidence
    scores = {c["candidate_id"]: c for c in packet["candidates"]}

    def as_template(components: Mapping[str, str]) -> PromptTemplate | None:
        if template is None or "demos" not in components:
            return None
        try:
            return template.with_components(components)
        except TemplateError:  # a GEPA edit that broke the demos JSON: no template for it
            return None

    population = tuple(
        Member(
            candidate_id=r.candidate_id,
            origin=r.origin,
            parents=tuple(r.parents),
            components=dict(r.components),
            template=as_template(r.components),
            train=scores.get(r.candidate_id, {}).get("train"),
            holdout=scores.get(r.candidate_id, {}).get("holdout"),
            minibatch=scores.get(r.candidate_id, {}).get("minibatch"),
        )
        for r in await ws.list_candidates(run.run_id)
    )
    best = packet["best"]["components"]
    if method == "mipro":
        stats = tuple(packet.get("mipro", {}).get("trials", []))
    else:
        stats = _generations(await ws.events_since(run.run_id))
    return OptimizeResult(
        method=method,
        best_template=as_template(best),
        best_components=best,
        promoted=bool(packet["promotion"]["promoted"]),
        lift=float(packet["promotion"]["lift"]),
        population=population,
        stats=stats,
        run=run,
    )


def _generations(events: Sequence[Event]) -> tuple[dict[str, Any], ...]:
    """One row per GEPA iteration: the proposal's fate, its (last) gate, the best train mean
    after it (a rebased proposal's row shows the gate of its rebased text)."""
    rows: dict[int, dict[str, Any]] = {}
    best: float | None = None
    current: int | None = None
    outcomes = {"gate": "gated", "proposal_rejected": "rejected", "skipped": "skipped"}
    for event in events:
        d = event.data
        if event.type == "scored" and d.get("split") == "train" and d.get("mean") is not None:
            best = d["mean"] if best is None else max(best, d["mean"])
            if current is not None:
                rows[current]["best_train"] = best
        elif event.type in outcomes and "iteration" in d:
            current = int(d["iteration"])
            row = rows.setdefault(current, {"iteration": current})
            row["outcome"] = outcomes[event.type]
            row["best_train"] = best
            for key in (
                "candidate_id",
                "parent",
                "parent_score",
                "child_score",
                "accepted",
                "reason",
            ):
                if key in d:
                    row[key] = d[key]
    # With proposals in flight, iterations finish out of order: each row gets the best train
    # mean known once it and every earlier iteration had finished.
    ordered, so_far = [rows[k] for k in sorted(rows)], None
    for row in ordered:
        if row.get("best_train") is not None:
            so_far = row["best_train"] if so_far is None else max(so_far, row["best_train"])
        row["best_train"] = so_far
    return tuple(ordered)


class _Workspace:
    """An open workspace: the caller's, or one opened (and closed) here."""

    def __init__(self, workspace: Workspace | str | Path) -> None:
        self._given = workspace if isinstance(workspace, Workspace) else None
        self._path = None if isinstance(workspace, Workspace) else Path(workspace)
        self._owned: Workspace | None = None

    async def __aenter__(self) -> Workspace:
        if self._given is not None:
            return self._given
        self._owned = Workspace(self._path or ".gepa")
        await self._owned.open()
        return self._owned

    async def __aexit__(self, *exc: object) -> None:
        if self._owned is not None:
            await self._owned.close()
