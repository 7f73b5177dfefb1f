"""A run's ``why`` and ``compare`` documents, as the API serves them and the CLI prints them.

Both read only what the run stored: its events, its candidates and the rollout cache (no
rollout is paid), so a finished run answers as a live one does. A candidate is named by its
id or a unique prefix of it (:func:`optimizer.runtime.lifecycle.branch.find_candidate`).
"""

from __future__ import annotations

from typing import Any

from optimizer.runtime.lifecycle.branch import find_candidate
from optimizer.runtime.results.compare import compare
from optimizer.runtime.results.why import explain, read_events
from optimizer.searches import SEARCHES
from schemas import UserError
from workspace import Workspace

__all__ = ["compare_document", "why_document"]


async def why_document(ws: Workspace, run_id: str, candidate: str | None = None) -> dict[str, Any]:
    """Why each candidate of ``run_id`` (or only ``candidate``) was kept or dropped."""
    record = await ws.get_run(run_id)
    name = record.config.get("method") or "gepa"
    method = SEARCHES.get(name)
    if method is None:
        raise UserError(f"run {run_id} ran method {name!r}, which this gepa-runtime does not know")
    records = await ws.list_candidates(run_id)
    if candidate is not None:
        records = [await find_candidate(ws, run_id, candidate)]
    events = await read_events(ws, run_id)
    branch = record.config.get("branch_of")
    return {
        "run_id": run_id,
        "method": name,
        "status": record.status,
        "phase": record.phase,
        "branch_of": branch,
        "candidates": explain(events, records, method, branch_of=branch),
    }


async def compare_document(ws: Workspace, run_id: str, a: str, b: str) -> dict[str, Any]:
    """Candidates ``a`` and ``b`` of ``run_id`` side by side
    (:func:`optimizer.runtime.results.compare.compare`)."""
    record = await ws.get_run(run_id)
    first, second = await find_candidate(ws, run_id, a), await find_candidate(ws, run_id, b)
    if first.candidate_id == second.candidate_id:
        raise UserError(f"{a!r} and {b!r} are the same candidate: name two different ones")
    return await compare(ws, record, first, second, await read_events(ws, run_id))
