"""``run_check``: one check from a spec to a verdict.

The container is the one given (``--container`` or ``--module``), else the run's (its URLs,
or its module served in this process). Both sides are scored on the same seeds of one split:
with ``--run``, the seeds its promotion paired best and baseline on (so a check of its best
against its baseline reproduces its lift and interval from the cache), else every seed of the
split. A run's program that changed since (a new fingerprint) is reported: its rollouts are
paid again, and the difference from the recorded lift is the drift.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from optimizer.regression.measure import measure
from optimizer.regression.sources import RunContext, Side, load_run, resolve_side
from optimizer.regression.spec import SPLITS, CheckResult, CheckSpec
from optimizer.regression.verdict import judge
from optimizer.runtime import (
    ContainerClient,
    client_for,
    container_for,
    resolve_inputs,
    stored_config,
)
from schemas import ContainerError, ContainerUnavailable, Policy, Program, RunConfig, UserError
from workspace import Workspace

__all__ = ["run_check"]


async def run_check(spec: CheckSpec, workspace: Workspace) -> CheckResult:
    """Score the candidate and the reference on the same seeds and judge the lift."""
    run = await load_run(workspace, spec.run_id) if spec.run_id else None
    if spec.candidate is None and run is None:
        raise UserError(
            "name the candidate to check: --candidate FILE (a prompt file, a candidate id, "
            "prompts:/NAME@ALIAS), or --run RUN_ID to check a run's best"
        )
    async with _client(spec, run, workspace) as client:
        program = await client.program()
        return await _checked(spec, run, workspace, client, program)


@contextlib.asynccontextmanager
async def _client(
    spec: CheckSpec, run: RunContext | None, workspace: Workspace
) -> AsyncIterator[ContainerClient]:
    """A client of the container the check runs against, healthy (or a ``UserError``)."""
    stored, given = await _where(spec, run, workspace)
    async with container_for(stored, given) as runnable:
        client = client_for(runnable or stored)
        try:
            try:
                await client.check_health()
            except ContainerUnavailable as exc:
                raise UserError(str(exc)) from exc
            yield client
        finally:
            await client.aclose()


async def _where(
    spec: CheckSpec, run: RunContext | None, workspace: Workspace
) -> tuple[RunConfig, RunConfig]:
    """(where the container is, its secrets) for ``container_for``: the spec's, else the run's."""
    given = spec.source
    if given.containers or given.module:
        return given, given
    if run is None:
        raise UserError(
            "no task container: pass --container URL (start it first), or --module MODULE "
            "--dataset PATH to serve it in this process, or --run RUN_ID to use the run's"
        )
    await workspace.checkout_files(run.run_id)  # a Postgres store's input copies, here
    stored = resolve_inputs(stored_config(run.record), workspace.root)
    if stored.module:
        return stored, given
    return stored, stored.model_copy(update={"container_token": given.container_token})


async def _checked(
    spec: CheckSpec,
    run: RunContext | None,
    workspace: Workspace,
    client: ContainerClient,
    program: Program,
) -> CheckResult:
    warnings = _drift_warnings(run, program)
    candidate = await resolve_side(spec.candidate or "best", program=program, run=run, ws=workspace)
    reference = await resolve_side(spec.reference, program=program, run=run, ws=workspace)
    split = spec.split or _measured_on(run) or "holdout"
    seeds, seeds_from = _seeds(program, split, run, warnings)
    config = run.record.config if run is not None else {}
    seed = spec.seed if spec.seed is not None else int(config.get("seed", 0))
    task_model = spec.task_model or config.get("task_model")
    check_id = f"check-{secrets.token_hex(5)}"
    measured = await measure(
        client=client,
        workspace=workspace,
        program=program,
        sides={"candidate": candidate, "reference": reference},
        seeds=seeds,
        policy=Policy(model=task_model),
        check_id=check_id,
        concurrency=spec.concurrency,
        max_calls=spec.max_metric_calls,
    )
    scores = measured.scores
    verdict = judge(scores["candidate"], scores["reference"], margin=spec.margin, seed=seed)
    if verdict.n == 0:
        raise ContainerError(_unscored(measured.errors, len(seeds)))
    return CheckResult(
        check_id=check_id,
        candidate=candidate,
        reference=reference,
        verdict=verdict,
        program_id=program.program_id,
        fingerprint=program.fingerprint,
        split=split,
        seeds=tuple(seeds),
        seeds_from=seeds_from,
        scores=scores,
        errors=measured.errors,
        paid=measured.paid,
        cached=measured.cached,
        seed=seed,
        task_model=task_model,
        run_id=run.run_id if run is not None else None,
        recorded=_recorded(run, candidate, reference, split),
        warnings=tuple(warnings),
    )


def _measured_on(run: RunContext | None) -> str | None:
    promotion = run.promotion() if run is not None else None
    return None if promotion is None else str(promotion.get("measured_on", "holdout"))


def _seeds(
    program: Program, split: str, run: RunContext | None, warnings: list[str]
) -> tuple[list[str], str]:
    """The seeds to send both sides to, and how they were chosen."""
    if split not in SPLITS:
        raise UserError(f"--split {split!r}: name one of {', '.join(SPLITS)}")
    served = list(getattr(program.seeds, split))
    if not served:
        raise UserError(
            f"program {program.program_id!r} has no {split} seeds: pass --split with a split it "
            f"has ({', '.join(s for s in SPLITS if getattr(program.seeds, s)) or 'none'})"
        )
    measured = run.measured_seeds(split) if run is not None else None
    if measured is None:
        return served, f"every {split} seed the container serves"
    now = set(served)
    kept = [s for s in measured if s in now]
    if len(kept) < len(measured):
        warnings.append(
            f"{len(measured) - len(kept)} of the {len(measured)} {split} seeds run "
            f"{run.run_id if run else ''} measured its lift on are no longer served; "
            f"checked on the {len(kept)} left"
        )
    if not kept:
        return served, f"every {split} seed the container serves (none of the run's is left)"
    return kept, f"the {split} seeds run {run.run_id if run else ''} measured its lift on"


def _drift_warnings(run: RunContext | None, program: Program) -> list[str]:
    """``UserError`` for another program than the run's; a warning for a new version of it."""
    if run is None or run.record.program_id is None:
        return []
    record = run.record
    if record.program_id != program.program_id:
        raise UserError(
            f"run {record.run_id} optimized program {record.program_id!r}, but the container "
            f"serves {program.program_id!r}: point --container at the run's program"
        )
    if record.fingerprint and record.fingerprint != program.fingerprint:
        return [
            f"the container changed since run {record.run_id} (fingerprint "
            f"{record.fingerprint[:12]} -> {program.fingerprint[:12]}): its rollouts are scored "
            "again on the container as it is now; a lift below the run's is drift"
        ]
    return []


def _recorded(
    run: RunContext | None, candidate: Side, reference: Side, split: str
) -> dict[str, object] | None:
    """The run's promotion, when this check repeats it (its best against its baseline)."""
    promotion = run.promotion() if run is not None else None
    if run is None or promotion is None or promotion.get("measured_on", "holdout") != split:
        return None
    if candidate.components != run.best() or reference.components != run.baseline():
        return None
    keys = ("lift", "ci_low", "ci_high", "n", "promoted")
    return {k: promotion[k] for k in keys if k in promotion}


def _unscored(errors: dict[str, dict[str, str]], seeds: int) -> str:
    failed = {seed: why for side in errors.values() for seed, why in side.items()}
    last = next(iter(failed.values()), "no rollout was sent")
    return (
        f"no seed of {seeds} was scored for both sides ({len(failed)} failed after their "
        f"retries); check that the container and its model are up. Last error: {last}"
    )
