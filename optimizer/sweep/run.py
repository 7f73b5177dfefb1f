"""``run_sweep``: one optimization per student model on the same container, then the comparison.

Each model gets a run of its own (the config with ``task_model`` set to it, so the model
reaches the container as ``policy.model``), run one after the other in one workspace: their
rollouts go through the one rollout cache, keyed by (fingerprint, candidate, seed, policy),
so a rollout two runs share (a model's baseline in a sweep run again, or in an earlier run
of that model) is paid once. A run that fails is reported in the comparison; the others go
on. The sweep's folder ``<workspace>/sweeps/<sweep_id>/`` holds ``sweep.json`` (the models
and their runs, written as they start), ``comparison.json`` and ``comparison.md``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from optimizer.runtime.lifecycle.run import RunResult
from optimizer.runtime.lifecycle.run_inputs import create_with_inputs
from optimizer.runtime.search.deps import ProposerLike
from optimizer.searches import run_stored
from optimizer.sweep.compare import Comparison, ModelRow, compare, model_row, render_markdown
from schemas import GepaError, RunConfig, UserError
from workspace import Workspace, resolve_workspace

__all__ = ["SweepResult", "gather", "parse_models", "run_sweep", "sweep_dir"]


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: its id, folder, comparison, and each model's run (None: failed)."""

    sweep_id: str
    folder: Path
    comparison: Comparison
    runs: dict[str, RunResult | None]


def parse_models(value: str | Sequence[str]) -> list[str]:
    """``a,b,c`` (or a list) as distinct model names; a clear error for none or repeats."""
    names = [m.strip() for m in (value.split(",") if isinstance(value, str) else value)]
    names = [m for m in names if m]
    if not names:
        raise UserError("--student-models needs at least one model name, e.g. m1,m2")
    repeated = sorted({m for m in names if names.count(m) > 1})
    if repeated:
        raise UserError(f"--student-models names {', '.join(repeated)} more than once")
    return names


def sweep_dir(workspace: Workspace, sweep_id: str) -> Path:
    """The folder of a sweep, ``<workspace>/sweeps/<sweep_id>``."""
    if not sweep_id or "/" in sweep_id or sweep_id.startswith("."):
        raise UserError(f"sweep id {sweep_id!r} is not a plain name")
    return workspace.root.resolve() / "sweeps" / sweep_id


async def _write(folder: Path, name: str, text: str) -> None:
    def write() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f".{name}.tmp").write_text(text, encoding="utf-8")
        (folder / f".{name}.tmp").replace(folder / name)

    await asyncio.to_thread(write)


async def run_sweep(
    config: RunConfig,
    student_models: str | Sequence[str],
    *,
    workspace: Workspace | str | Path | None = None,
    target_score: float | None = None,
    sweep_id: str | None = None,
    on_event: Callable[..., None] | None = None,
    on_run: Callable[[str, str], None] | None = None,
    http: httpx.AsyncClient | None = None,
    proposer: ProposerLike | None = None,
) -> SweepResult:
    """One optimization of ``config`` per student model, then the comparison (see module).

    ``workspace`` is an open workspace or a folder (default ``GEPA_WORKSPACE``, else
    ``./.gepa``); ``on_run(model, run_id)`` hears each run as it starts; ``on_event`` gets
    every run's events.
    """
    models = parse_models(student_models)
    if isinstance(workspace, Workspace):
        return await _sweep(workspace, config, models, target_score, sweep_id, on_event, on_run, http, proposer)  # fmt: skip
    async with Workspace(resolve_workspace(workspace)) as ws:
        return await _sweep(ws, config, models, target_score, sweep_id, on_event, on_run, http, proposer)  # fmt: skip


async def _sweep(
    ws: Workspace,
    config: RunConfig,
    models: list[str],
    target_score: float | None,
    sweep_id: str | None,
    on_event: Callable[..., None] | None,
    on_run: Callable[[str, str], None] | None,
    http: httpx.AsyncClient | None,
    proposer: ProposerLike | None,
) -> SweepResult:
    sweep_id = sweep_id or f"sweep-{secrets.token_hex(5)}"
    folder = sweep_dir(ws, sweep_id)
    manifest: dict[str, Any] = {"sweep_id": sweep_id, "models": models, "target_score": target_score, "runs": {}}  # fmt: skip
    results: dict[str, RunResult | None] = {}
    for model in models:
        own = config.model_copy(update={"task_model": model})
        record = await create_with_inputs(ws, own)
        manifest["runs"][model] = record.run_id
        await _write(folder, "sweep.json", json.dumps(manifest, indent=2))
        if on_run is not None:
            on_run(model, record.run_id)
        try:
            results[model] = await run_stored(
                ws, record.run_id, secrets=own, on_event=on_event, http=http, proposer=proposer
            )
        except GepaError:  # recorded on the run (failed); the comparison reports it
            results[model] = None
    comparison = await gather(ws, manifest)
    await _write(folder, "comparison.json", json.dumps(comparison.to_json(), indent=2))
    await _write(folder, "comparison.md", render_markdown(comparison))
    return SweepResult(sweep_id, folder, comparison, results)


async def gather(ws: Workspace, manifest: dict[str, Any]) -> Comparison:
    """The comparison of a sweep's runs as the workspace holds them now."""
    rows: list[ModelRow] = []
    outputs: dict[str, dict[tuple[str, str], tuple[str, float | None]]] = {}
    for model, run_id in manifest["runs"].items():
        record = await ws.get_run(run_id)
        packet = None
        if "evidence.json" in await ws.list_files(run_id):
            packet = json.loads(await ws.read_file(run_id, "evidence.json"))
        latencies: list[float] = []
        outputs[model] = mine = {}
        for candidate in await ws.list_candidates(run_id):
            ok = [r for r in await ws.rollouts_for_candidate(run_id, candidate.candidate_id) if r.status == "ok"]  # fmt: skip
            mine.update({(r.candidate_hash, r.seed): (json.dumps(r.output), r.reward) for r in ok})
            if packet is not None and candidate.candidate_id in (
                packet["baseline"]["candidate_id"],
                packet["best"]["candidate_id"],
            ):
                latencies += [r.usage.latency_ms or r.latency_ms for r in ok]  # the student's own
        rows.append(model_row(model, run_id, record.status, packet, latencies))
    return compare(rows, outputs, manifest.get("target_score"))
