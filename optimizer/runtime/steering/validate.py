"""Whether an action may be recorded: its body, its candidate, and the run's state.

Every refusal is an :class:`~schemas.ActionRefused` whose message names the fix:

- ``invalid`` (422): a body that is not an action, or lacks a field the action needs;
- ``unknown`` (404): a candidate the run does not have (a unique prefix of an id is enough);
- ``conflict`` (409): an action that does not fit the run: any action on a completed run,
  reject, pin, unpin, note or stop once its search is over, rejecting the baseline or a
  candidate already rejected, pinning a rejected candidate or the one already pinned,
  unpinning with nothing pinned, pausing a paused run, resuming one not paused, stopping
  one already stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from optimizer.runtime.steering.state import Steering
from schemas import Action, ActionRefused, CandidateRecord, RunRecord

__all__ = ["SEARCH_OVER", "check_action", "parse_action"]

# Phases after the search: actions on the search (reject, pin, note, stop) come too late.
SEARCH_OVER = frozenset({"evaluating_best", "finalizing", "completed"})
_ON_SEARCH = frozenset({"reject", "pin", "unpin", "note", "stop"})
_LIST = "list them with `gepa-runtime runs show {run}` (or GET /api/runs/{run}/candidates)"


def parse_action(data: Any) -> Action:
    """The action of a request body; ``invalid`` naming the field when it is not one."""
    if not isinstance(data, dict):
        raise ActionRefused("invalid", 'the body must be a JSON object such as {"action": "pause"}')
    try:
        action = Action.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise ActionRefused("invalid", f"invalid action: {problems}") from None
    _require_fields(action)
    return action


def _require_fields(action: Action) -> None:
    """``invalid`` naming the first field ``action`` needs and lacks (or leaves blank)."""
    needs = {"reject": ("candidate_id", "reason"), "pin": ("candidate_id",), "note": ("text",)}
    for name in needs.get(action.action, ()):
        value = getattr(action, name)
        if value is None or not str(value).strip():
            raise ActionRefused("invalid", f"{name}: {action.action} needs a non-empty {name}")


def check_action(
    action: Action, steering: Steering, run: RunRecord, candidates: Sequence[CandidateRecord]
) -> Action:
    """``action`` as it is recorded (its candidate's full id), if it fits the run now."""
    _require_fields(action)
    rid = run.run_id
    if run.status == "completed":
        raise ActionRefused(
            "conflict",
            f"run {rid} has completed: a person's actions steer a run that has not ended; "
            f"read its evidence with `gepa-runtime runs show {rid}`, or start a new run",
        )
    if action.action in _ON_SEARCH and run.phase in SEARCH_OVER:
        raise ActionRefused(
            "conflict",
            f"the search of run {rid} is over (phase {run.phase}): {action.action} steers a "
            "search; only pause and resume still apply",
        )
    cid = _candidate(action.candidate_id, run, candidates) if action.candidate_id else None
    action = action.model_copy(update={"candidate_id": cid})
    problem = _conflict(action, steering, rid, candidates)
    if problem is not None:
        raise ActionRefused("conflict", problem)
    return action


def _candidate(given: str, run: RunRecord, candidates: Sequence[CandidateRecord]) -> str:
    """The full id of the candidate ``given`` names (its id or a unique prefix of it)."""
    ids = [c.candidate_id for c in candidates]
    if given in ids:
        return given
    matches = [cid for cid in ids if cid.startswith(given)] if len(given) >= 4 else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ActionRefused(
            "unknown",
            f"candidate {given!r} of run {run.run_id} is ambiguous: it starts "
            f"{', '.join(matches[:5])}; give more of its id",
        )
    raise ActionRefused(
        "unknown",
        f"run {run.run_id} has no candidate {given!r}: " + _LIST.format(run=run.run_id),
    )


def _conflict(
    action: Action, steering: Steering, rid: str, candidates: Sequence[CandidateRecord]
) -> str | None:
    """Why ``action`` does not fit the run's steering now, or ``None``."""
    kind, cid = action.action, action.candidate_id
    baseline = next((c.candidate_id for c in candidates if c.origin == "seed"), None)
    if kind == "pause" and steering.paused:
        return f"run {rid} is paused already; resume it with `gepa-runtime runs resume {rid}`"
    if kind == "resume" and not steering.paused:
        return f"run {rid} is not paused: nothing to resume (pause it first)"
    if kind == "stop" and steering.stop is not None:
        return f"run {rid} was stopped already ({steering.stop.describe()})"
    if kind == "unpin" and steering.pinned is None:
        return f"run {rid} has no pinned candidate: nothing to unpin (pin one first)"
    if kind == "reject" and cid == baseline:
        return (
            f"{cid} is the baseline of run {rid}: it cannot be rejected, since every lift is "
            "measured against it; reject the candidates built on it instead"
        )
    if kind in ("reject", "pin") and cid is not None and cid in steering.rejected:
        why = steering.rejected[cid] or "no reason given"
        fix = "pin another candidate" if kind == "pin" else "nothing more to do"
        return f"{cid} of run {rid} is rejected already ({why}): {fix}"
    if kind == "pin" and cid == steering.pinned:
        return (
            f"{cid} is pinned already in run {rid}; unpin it with `gepa-runtime runs unpin {rid}`"
        )
    return None
