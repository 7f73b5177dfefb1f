"""How close ``optimize plan`` comes to what the run then spends: plan, then run, compare.

    .venv/bin/python bench/plan_accuracy.py                                  # 3 simulated tasks x 3 seeds
    .venv/bin/python bench/plan_accuracy.py --tasks additive --seeds 0 --time-scale 0.25
    .venv/bin/python bench/plan_accuracy.py --tasks banking77 --seeds 0,1,2  # the main job, local models

For each (task, seed) of the race (``bench/race.py``: the same containers, reflection
models and flags as its ``ours-N`` contestant), it runs ``gepa-runtime optimize plan --json``,
then ``gepa-runtime optimize run`` with the same flags, and prints the predicted and the actual
container calls (counted by the container, or the run's paid rollouts on banking77),
reflection calls and wall time (the ``optimize run`` process, start to end), with the error of
each prediction. ``--gepa-budget`` sets the budget as in the race; ``--ours-flags`` adds flags
to both commands (e.g. ``--patience 0`` for a run that spends its whole budget).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import race  # noqa: E402

DEFAULT_IN_FLIGHT = 4


@dataclass
class Row:
    """One (task, seed): the plan's figures and the run's."""

    task: str
    seed: int
    planned_calls: float
    calls: int
    planned_reflections: float
    reflections: int
    planned_wall_s: float
    wall_s: float
    run_wall_s: float  # the run's own, start to evidence (the process's less its start-up)
    plan_s: float  # how long the plan took
    stop_reason: str

    def error(self, planned: float, actual: float) -> float:
        """(planned - actual) / actual."""
        return (planned - actual) / actual if actual else 0.0


def plan(arena: race.Arena, in_flight: int, workdir: Path) -> tuple[dict[str, object], float]:
    """``optimize plan --json`` in ``arena``: the forecast and the seconds it took."""
    cmd = [
        str(ROOT / ".venv" / "bin" / "gepa-runtime"), "optimize", "plan", "--json",
        "--workspace", str(workdir / "plan"), *race.our_flags(arena, in_flight),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        cmd, cwd=ROOT, env=race.checkout_env({**os.environ, **arena.env}),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"optimize plan failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)["forecast"], time.monotonic() - started


def measure(arena: race.Arena, in_flight: int, workdir: Path) -> Row:
    """Plan, then run, in ``arena``."""
    arena.reset()
    forecast, plan_s = plan(arena, in_flight, workdir)
    result = race.run_ours(arena, in_flight, workdir)  # resets the servers' counters first
    packet = json.loads(
        next((workdir / f"ours-{in_flight}").glob("runs/*/evidence.json")).read_text()
    )
    figure = {name: float(f["value"] or 0) for name, f in forecast.items() if isinstance(f, dict)}
    return Row(
        task=arena.task,
        seed=arena.seed,
        planned_calls=figure["container_calls"],
        calls=result.container_calls,
        planned_reflections=figure["reflection_calls"],
        reflections=result.reflection_calls,
        planned_wall_s=figure["wall_s"],
        wall_s=result.wall_s,
        run_wall_s=packet["finished_at"] - packet["started_at"],
        plan_s=plan_s,
        stop_reason=result.stop_reason,
    )


def table(rows: list[Row]) -> str:
    """Per (task, seed): planned and actual calls, reflections and wall time, with errors."""
    head = (
        f"{'task':<12} {'seed':>4} {'calls plan':>10} {'actual':>6} {'err':>6} "
        f"{'refl plan':>9} {'actual':>6} {'wall plan':>9} {'actual':>7} {'err':>6} "
        f"{'run wall':>8} {'plan s':>6}  stop"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.task:<12} {r.seed:>4} {r.planned_calls:>10.0f} {r.calls:>6} "
            f"{r.error(r.planned_calls, r.calls):>+6.1%} {r.planned_reflections:>9.0f} "
            f"{r.reflections:>6} {r.planned_wall_s:>9.1f} {r.wall_s:>7.1f} "
            f"{r.error(r.planned_wall_s, r.wall_s):>+6.1%} {r.run_wall_s:>8.1f} {r.plan_s:>6.1f}"
            f"  {r.stop_reason[:60]}"
        )
    calls = [abs(r.error(r.planned_calls, r.calls)) for r in rows]
    walls = [abs(r.error(r.planned_wall_s, r.wall_s)) for r in rows]
    lines += [
        "",
        f"container calls: mean |error| {statistics.mean(calls):.1%}, worst {max(calls):.1%}, "
        f"{sum(e <= 0.10 for e in calls)}/{len(rows)} within 10%",
        f"wall time:       mean |error| {statistics.mean(walls):.1%}, worst {max(walls):.1%}, "
        f"{sum(e <= 0.30 for e in walls)}/{len(rows)} within 30%",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, race._exit_on_sigterm)  # stops the servers it started too
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default=",".join(race.SIMULATED), help="comma-separated; or banking77"
    )
    parser.add_argument("--seeds", type=race._seeds, default="0,1,2", help="0,1,2 or a range")
    parser.add_argument(
        "--in-flight", type=int, default=None,
        help=f"proposals in flight (default {DEFAULT_IN_FLIGHT}; banking77: the main job's)",
    )  # fmt: skip
    parser.add_argument("--gepa-budget", type=int, default=None, help="as in bench/race.py")
    parser.add_argument("--concurrency", type=int, default=None, help="as in bench/race.py")
    parser.add_argument("--latency", type=float, default=0.3, help="container seconds per rollout")
    parser.add_argument("--reflection-latency", type=float, default=4.0, help="seconds per call")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiplies both latencies")
    parser.add_argument("--reflection-errors", default="none", help="as in bench/race.py")
    parser.add_argument("--ours-flags", default="", help="extra flags for plan and run")
    parser.add_argument("--json", type=Path, default=None, help="also write every row here")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="plan-accuracy-") as tmp:
        for task in [t for t in args.tasks.split(",") if t]:
            for seed in args.seeds:
                arena_cm = (
                    race.banking77(seed, args)
                    if task == "banking77"
                    else race.simulated(task, seed, args)
                )
                with arena_cm as arena:
                    arena.ours_flags = tuple(args.ours_flags.split())
                    in_flight = args.in_flight or _in_flight(task)
                    workdir = Path(tmp) / f"{task}-{seed}"
                    workdir.mkdir()
                    row = measure(arena, in_flight, workdir)
                    rows.append(row)
                    print(
                        f"[plan] {task} seed {seed}: calls {row.planned_calls:.0f} planned, "
                        f"{row.calls} spent; wall {row.planned_wall_s:.1f}s planned, "
                        f"{row.wall_s:.1f}s taken",
                        flush=True,
                    )
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


def _in_flight(task: str) -> int:
    if task != "banking77":
        return DEFAULT_IN_FLIGHT
    from examples.banking77.design import DESIGN

    return int(DESIGN.proposals_in_flight)


if __name__ == "__main__":
    raise SystemExit(main())
