"""Two candidates of a run side by side: their prompt diff, their per-seed scores, and the
traces and feedback on the seeds where they differ. From stored rollouts: nothing is paid.

    view = await compare(workspace, record, a, b, events)

A seed's rollouts are looked up in the rollout cache under the run's program fingerprint and
policy, the keys its rollouts were stored under, so a rollout the run reused from another
run's cache (a branch's baseline, a re-run) counts as its own; a seed neither candidate was
scored on is left out. The split of each seed is the run's plan (its ``program`` event).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from schemas import CandidateRecord, Event, Policy, RolloutRecord, RunRecord, cache_key
from workspace import Workspace

__all__ = ["MAX_TRACES", "compare", "compare_lines", "component_diffs"]

MAX_TRACES = 12  # seeds where they differ shown with their traces; the rest are counted
SPLITS = ("train", "val", "holdout")


def component_diffs(a: CandidateRecord, b: CandidateRecord) -> dict[str, str]:
    """The unified diff of each component that differs, ``a`` -> ``b``."""
    out = {}
    for name in sorted(set(a.components) | set(b.components)):
        before, after = a.components.get(name, ""), b.components.get(name, "")
        if before != after:
            lines = difflib.unified_diff(
                before.splitlines(),
                after.splitlines(),
                fromfile=f"{a.candidate_id}/{name}",
                tofile=f"{b.candidate_id}/{name}",
                lineterm="",
            )
            out[name] = "\n".join(lines)
    return out


def _splits(events: Sequence[Event]) -> dict[str, list[str]] | None:
    """The seeds of each split from the run's last ``program`` event (``None``: not logged)."""
    program = next((e for e in reversed(events) if e.type == "program"), None)
    splits = program.data.get("splits") if program is not None else None
    return {k: list(splits.get(k) or []) for k in SPLITS} if splits else None


async def _rollouts(
    ws: Workspace, record: RunRecord, candidate: CandidateRecord, seeds: Sequence[str]
) -> dict[str, RolloutRecord]:
    """The candidate's stored rollout of each seed, by cache key (run's fingerprint, policy)."""
    policy = Policy(model=record.config.get("task_model"))
    fingerprint = record.fingerprint or ""
    keys = {cache_key(fingerprint, candidate.content_hash, s, policy): s for s in seeds}
    found = await ws.lookup_many(list(keys))
    return {keys[k]: r for k, r in found.items()}


def _side(r: RolloutRecord | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "rollout_id": r.rollout_id,
        "reward": r.reward,
        "output": r.output,
        "feedback": r.feedback,
        "trace": r.trace,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means of each on the seeds both were scored on, and who is better on how many."""
    both = [r for r in rows if r["a"] is not None and r["b"] is not None]
    n = len(both)
    return {
        "seeds": rows,
        "n": n,
        "a_mean": sum(r["a"] for r in both) / n if n else None,
        "b_mean": sum(r["b"] for r in both) / n if n else None,
        "a_better": sum(1 for r in both if r["a"] > r["b"]),
        "b_better": sum(1 for r in both if r["b"] > r["a"]),
        "same": sum(1 for r in both if r["a"] == r["b"]),
    }


async def compare(
    ws: Workspace,
    record: RunRecord,
    a: CandidateRecord,
    b: CandidateRecord,
    events: Sequence[Event],
) -> dict[str, Any]:
    """``a`` and ``b`` of the run ``record`` side by side (``events``: the run's, for its
    splits; a run that did not log them gets every seed either was scored on, as ``seeds``)."""
    splits = _splits(events)
    if splits is None:
        used = {
            r.seed
            for c in (a, b)
            for r in await ws.rollouts_for_candidate(record.run_id, c.candidate_id)
        }
        splits = {"seeds": sorted(used)}
    every = [s for seeds in splits.values() for s in seeds]
    mine, theirs = await _rollouts(ws, record, a, every), await _rollouts(ws, record, b, every)
    sections: dict[str, Any] = {}
    differing: list[dict[str, Any]] = []
    for split, seeds in splits.items():
        rows = []
        for seed in seeds:
            ra, rb = mine.get(seed), theirs.get(seed)
            if ra is None and rb is None:
                continue
            rows.append(
                {
                    "seed": seed,
                    "a": ra.reward if ra is not None else None,
                    "b": rb.reward if rb is not None else None,
                }
            )
            if ra is not None and rb is not None and ra.reward != rb.reward:
                differing.append({"seed": seed, "split": split, "a": _side(ra), "b": _side(rb)})
        if rows:
            sections[split] = _summary(rows)
    return {
        "run_id": record.run_id,
        "a": _about(a),
        "b": _about(b),
        "diff": component_diffs(a, b),
        "splits": sections,
        "differing": differing[:MAX_TRACES],
        "differing_total": len(differing),
    }


def _about(c: CandidateRecord) -> dict[str, Any]:
    return {
        "candidate_id": c.candidate_id,
        "origin": c.origin,
        "parents": list(c.parents),
        "rationale": c.rationale[:1000],
        "components": dict(c.components),
    }


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _trace_lines(side: Mapping[str, Any] | None) -> list[str]:
    messages = ((side or {}).get("trace") or {}).get("messages") or []
    return [f"      {m.get('role', '?')}: {str(m.get('content'))[:240]}" for m in messages[:6]]


def compare_lines(view: Mapping[str, Any]) -> list[str]:
    """The comparison as text (what ``runs compare`` prints)."""
    a, b = view["a"]["candidate_id"], view["b"]["candidate_id"]
    out = [f"A = {a} ({view['a']['origin']}), B = {b} ({view['b']['origin']})", ""]
    out += ["## Prompt diff (A -> B)", ""]
    out += [line for text in view["diff"].values() for line in [text, ""]] or ["(same text)", ""]
    for split, section in view["splits"].items():
        out += [
            f"## {split}: A {_score(section['a_mean'])}, B {_score(section['b_mean'])} on "
            f"{section['n']} seeds both were scored on (A better on {section['a_better']}, "
            f"B on {section['b_better']}, same on {section['same']})",
            "",
            f"{'seed':<28} {'A':>6} {'B':>6}",
        ]
        out += [
            f"{row['seed']:<28} {_score(row['a']):>6} {_score(row['b']):>6}"
            + (
                "  *"
                if row["a"] is not None and row["b"] is not None and row["a"] != row["b"]
                else ""
            )
            for row in section["seeds"]
        ]
        out.append("")
    out += [f"## Where they differ ({view['differing_total']} seeds)", ""]
    for d in view["differing"]:
        out.append(
            f"{d['seed']} ({d['split']}): A {_score(d['a']['reward'])}, B {_score(d['b']['reward'])}"
        )
        for name, side in (("A", d["a"]), ("B", d["b"])):
            out.append(f"  {name} output: {str(side['output'])[:200]}")
            out.append(f"  {name} feedback: {(side['feedback'] or '-')[:400]}")
            out += _trace_lines(side)
        out.append("")
    hidden = view["differing_total"] - len(view["differing"])
    if hidden > 0:
        out.append(
            f"(and {hidden} more seeds where they differ; --json lists the first {MAX_TRACES})"
        )
    return out
