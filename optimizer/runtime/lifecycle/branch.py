"""A branch: a new run whose baseline is a candidate of another run of the same workspace.

    record = await create_branch(ws, "run-1a2b3c4d5e", "9f3e0c", {"max_metric_calls": 120})

The branch's config is its origin's as stored (secrets left out: give them again, as for a
resume) with the overrides given, and ``branch_of`` naming the candidate. When it executes,
the program it is served has the candidate's texts as its component texts
(``branched_program``), so the candidate is its baseline and every phase after that is a
run's as usual. It runs against the same containers and policy: the baseline's rollouts its
origin stored (same fingerprint, same text, same seed) are cache hits and cost nothing.

The link is read both ways: a branch's config names its origin, and ``branches_of`` finds
the runs that branch from one run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from optimizer.runtime.lifecycle.run_config import MODULE_FIELDS, new_config, stored_config
from optimizer.runtime.lifecycle.run_inputs import create_with_inputs, resolve_inputs
from schemas import BranchOf, CandidateRecord, Program, RunConfig, RunRecord, UserError
from workspace import Workspace

__all__ = [
    "MIN_PREFIX",
    "branch_baseline",
    "branch_config",
    "branched_program",
    "branches_of",
    "create_branch",
    "find_candidate",
]

MIN_PREFIX = 4  # the shortest candidate id prefix a command accepts (the console shows 10)


async def find_candidate(ws: Workspace, run_id: str, candidate: str) -> CandidateRecord:
    """The candidate of ``run_id`` whose id is ``candidate``, or the only one it starts;
    a ``UserError`` naming the run's candidates otherwise (the run unknown: ``get_run``'s)."""
    await ws.get_run(run_id)
    records = await ws.list_candidates(run_id)
    exact = [r for r in records if r.candidate_id == candidate]
    found = exact or (
        [r for r in records if r.candidate_id.startswith(candidate)]
        if len(candidate) >= MIN_PREFIX
        else []
    )
    if len(found) == 1:
        return found[0]
    if found:
        ids = ", ".join(r.candidate_id for r in found[:5])
        raise UserError(
            f"candidate {candidate!r} is ambiguous in run {run_id} ({ids}): give more of its id"
        )
    known = ", ".join(r.candidate_id for r in records[:8]) or "none yet"
    raise UserError(
        f"run {run_id} has no candidate {candidate!r} (its candidates: {known}"
        f"{', ...' if len(records) > 8 else ''}); list them with `gepa-runtime runs show {run_id}`"
    )


def branch_config(origin: RunRecord, candidate_id: str, overrides: Mapping[str, Any]) -> RunConfig:
    """The branch's config: the origin's stored one, ``overrides`` on top, ``branch_of``
    naming the candidate (the origin's copied inputs still named in its run folder).

    A container given replaces the origin's module (and a module its containers); ``auto``
    given without ``max_metric_calls`` replaces the origin's explicit budget.
    """
    if "branch_of" in overrides:
        raise UserError("branch_of is set by the branch itself: leave it out of the overrides")
    data = stored_config(origin).model_dump()
    if overrides.get("containers"):
        data.update(dict.fromkeys(MODULE_FIELDS))
    if overrides.get("module"):
        data["containers"] = []
    if overrides.get("auto") and "max_metric_calls" not in overrides:
        data["max_metric_calls"] = None
    data.update(overrides)
    data["branch_of"] = {"run_id": origin.run_id, "candidate_id": candidate_id}
    try:
        return new_config(RunConfig.model_validate(data))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors()
        )
        raise UserError(f"invalid branch config: {problems}") from exc


async def create_branch(
    ws: Workspace,
    run_id: str,
    candidate: str,
    overrides: Mapping[str, Any],
    new_run_id: str | None = None,
    *,
    check: Callable[[RunConfig], None] | None = None,
) -> RunRecord:
    """Store a branch of ``run_id`` at ``candidate`` (an id or a unique prefix of one);
    ``UserError`` for an unknown run or candidate, or overrides that make no valid config.
    ``check`` may refuse the config before it is stored (the caller's policy). A ``--module``
    origin's input files are copied into the branch's own run folder, as ``create`` does."""
    record = await find_candidate(ws, run_id, candidate)
    config = branch_config(await ws.get_run(run_id), record.candidate_id, overrides)
    if check is not None:
        check(config)
    resolved = resolve_inputs(config, ws.root)  # the origin's copies, copied again
    return await create_with_inputs(ws, resolved, new_run_id, target_defaults=False)


async def branch_baseline(ws: Workspace, run_id: str, branch: BranchOf) -> dict[str, str]:
    """The components of the branch ``run_id``'s baseline: its own stored seed candidate once
    it has one (its origin may be deleted since), else the origin's candidate."""
    own = [c for c in await ws.list_candidates(run_id) if c.origin == "seed"]
    if own:
        return dict(own[0].components)
    try:
        origin = await ws.get_candidate(branch.run_id, branch.candidate_id)
    except UserError:
        raise UserError(
            f"run {run_id} branches from candidate {branch.candidate_id} of run "
            f"{branch.run_id}, which this workspace does not hold (any more); branch again "
            "from a candidate the workspace has"
        ) from None
    return dict(origin.components)


def branched_program(program: Program, components: Mapping[str, str], branch: BranchOf) -> Program:
    """``program`` with ``components`` as its component texts: the branch's baseline.

    ``UserError`` when the container serves other components than the candidate has (it
    was made for another program)."""
    served = sorted(c.name for c in program.components)
    if served != sorted(components):
        raise UserError(
            f"candidate {branch.candidate_id} of run {branch.run_id} has the components "
            f"{', '.join(sorted(components))}, but the container serves program "
            f"{program.program_id!r} with {', '.join(served)}: branch from a run of this program"
        )
    texts = [c.model_copy(update={"text": components[c.name]}) for c in program.components]
    return program.model_copy(update={"components": texts})


def branches_of(records: Iterable[RunRecord], run_id: str) -> list[dict[str, str]]:
    """The runs among ``records`` that branch from ``run_id``, oldest first: each run's id
    and the candidate it starts from."""
    found = []
    for record in sorted(records, key=lambda r: r.created_at):
        branch = record.config.get("branch_of") or {}
        if branch.get("run_id") == run_id:
            found.append({"run_id": record.run_id, "candidate_id": str(branch["candidate_id"])})
    return found
