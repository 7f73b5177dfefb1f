"""Where a finished run's time went, from its workspace alone: phases, student calls,
proposals, and the prompt tokens a shared-prefix cache could have reused.

    .venv/bin/python bench/job_time.py .gepa                     # the newest run there
    .venv/bin/python bench/job_time.py DIR --run RUN_ID --json out.json

It reads the run's events and rollouts (a SQLite workspace folder, read-only) and prints:

- the wall of each phase (baseline, search, the best's holdout, the rest), from the events;
- the student: paid rollouts, their summed latency, the time at least one was outstanding
  (the union of their intervals: with a one-slot local server, the time it was busy), the
  prompt and completion tokens;
- the proposals: each from its ``iteration`` event to the ``candidate`` event of the child
  it wrote (the reflection model writing it; a proposal that wrote nothing new is left out), their sum and the student's time outstanding meanwhile;
- the prompt tokens every call computes again: per candidate, the fewest prompt tokens of
  any of its calls is an upper bound on the prefix its calls share (its instructions), and
  that prefix times its calls less one is what a per-slot prefix cache could have reused.

It measures what the code did, on whatever machine ran it: the load of the machine then is
not known here, so compare runs made under the same conditions.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _connect(workspace: Path) -> sqlite3.Connection:
    db = workspace / "workspace.sqlite"
    if not db.is_file():
        sys.exit(f"no workspace at {workspace} (no workspace.sqlite): pass the --workspace folder")
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def _run_id(conn: sqlite3.Connection, run_id: str | None) -> str:
    if run_id is not None:
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            sys.exit(f"no run {run_id!r} in this workspace: `gepa-runtime runs list` names them")
        return run_id
    row = conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
    if row is None:
        sys.exit("this workspace holds no run")
    return str(row[0])


def _union(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one interval."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if a > end:
            total, end = total + (b - a), b
        elif b > end:
            total, end = total + (b - end), b
    return total


def _overlap(intervals: list[tuple[float, float]], window: tuple[float, float]) -> float:
    lo, hi = window
    return _union([(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi])


def breakdown(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's time and tokens, by where they went (see the module docstring)."""
    events = [
        (ts, kind, json.loads(data))
        for ts, kind, data in conn.execute(
            "SELECT ts, type, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        )
    ]
    if not events:
        sys.exit(f"run {run_id} has no events")
    start, end = events[0][0], events[-1][0]
    phases: dict[str, float] = defaultdict(float)
    marks = [(ts, d["phase"]) for ts, kind, d in events if kind == "phase"]
    for (ts, name), (nxt, _) in zip(marks, [*marks[1:], (end, "")], strict=True):
        phases[name] += nxt - ts
    calls: list[tuple[float, float]] = []
    tokens_in = tokens_out = 0
    by_candidate: dict[str, list[int]] = defaultdict(list)
    rows = conn.execute(
        "SELECT r.candidate_id, r.usage, r.latency_ms, r.created_at FROM trials t "
        "JOIN rollouts r ON r.id = t.rollout_id WHERE t.run_id = ? AND t.cached = 0",
        (run_id,),
    )
    for candidate_id, usage, latency_ms, created_at in rows:
        u = json.loads(usage or "{}")
        sent = int(u.get("input_tokens") or u.get("prompt_tokens") or 0)
        tokens_in += sent
        tokens_out += int(u.get("output_tokens") or u.get("completion_tokens") or 0)
        by_candidate[candidate_id].append(sent)
        calls.append((created_at - latency_ms / 1000, created_at))
    written: dict[int, float] = {}
    proposals: list[tuple[float, float]] = []
    for ts, kind, d in events:
        if kind == "iteration":
            written[int(d["iteration"])] = ts
        elif (
            kind == "candidate" and d.get("origin") == "mutation" and d.get("iteration") in written
        ):
            proposals.append((written.pop(d["iteration"]), ts))
    reusable = sum(min(sent) * (len(sent) - 1) for sent in by_candidate.values() if sent)
    writing = sum(b - a for a, b in proposals)
    return {
        "run_id": run_id,
        "wall_s": end - start,
        "phases_s": dict(phases),
        "student": {
            "paid_rollouts": len(calls),
            "latency_sum_s": sum(b - a for a, b in calls),
            "outstanding_s": _union(calls),
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "prompt_tokens_reusable": reusable,
        },
        "proposals": {
            "count": len(proposals),
            "writing_s": writing,
            "student_outstanding_meanwhile_s": sum(_overlap(calls, p) for p in proposals),
        },
    }


def _print(b: dict[str, Any]) -> None:
    wall, s, p = b["wall_s"], b["student"], b["proposals"]

    def line(what: str, seconds: float, note: str = "") -> None:
        print(f"  {what:<34} {seconds:8.1f} s  {100 * seconds / wall:5.1f}%  {note}")

    print(f"run {b['run_id']}: {wall:.1f} s from its first event to its last")
    print("phases:")
    for name, seconds in b["phases_s"].items():
        line(name, seconds)
    print("student (paid rollouts):")
    line("some student call outstanding", s["outstanding_s"], f"{s['paid_rollouts']} calls")
    print(
        f"  latency summed {s['latency_sum_s']:.1f} s ({s['latency_sum_s'] / max(1, s['paid_rollouts']):.2f} s a call, "
        f"queueing at the server included); prompt tokens {s['prompt_tokens']:,}, completion "
        f"tokens {s['completion_tokens']:,}"
    )  # fmt: skip
    share = s["prompt_tokens_reusable"] / max(1, s["prompt_tokens"])
    print(
        f"  prompt tokens a per-candidate prefix cache could reuse: at most "
        f"{s['prompt_tokens_reusable']:,} ({100 * share:.0f}% of the prompt tokens)"
    )
    print("proposals (the reflection model writing a child):")
    line("writing", p["writing_s"], f"{p['count']} proposals")
    line("  student busy meanwhile", p["student_outstanding_meanwhile_s"])
    idle = wall - s["outstanding_s"] - p["writing_s"] + p["student_outstanding_meanwhile_s"]
    line("neither (bookkeeping, waits)", idle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path, help="the run's --workspace folder (SQLite)")
    parser.add_argument("--run", default=None, help="run id (default: the newest run)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    with _connect(args.workspace) as conn:
        figures = breakdown(conn, _run_id(conn, args.run))
    _print(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
