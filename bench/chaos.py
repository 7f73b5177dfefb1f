"""The chaos bench: hostile scenarios against the real CLI and service processes.

    .venv/bin/python bench/chaos.py                      # every scenario, then the memory line
    .venv/bin/python bench/chaos.py --only faults,sigkill --no-memory --keep

Each scenario (``bench/chaos_scenarios.py``) gets a fresh workspace and its own container
processes (``bench/chaos_container.py``: deterministic scores, injected faults, a log of
every request) on 127.0.0.1, drives ``python -m optimizer.cli`` (and ``serve``) as separate
processes (``bench/chaos_procs.py``), and is then audited from the outside
(``bench/chaos_audit.py``): rollouts paid twice (from the container's log), planted secrets
found in the workspace or in anything the bench's processes printed or were served, stored
scores that differ from the container's rule. A scenario's own expectations (a refusal, a
completed run, ...) are checked too; any failure makes its verdict FAIL. The last line is
``bench/memory_bench.py``'s peak RSS with 16 MiB answers at concurrency 8 (target < 300 MB).
Exit code 1 when anything failed. What each scenario does and the figures: docs/chaos.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import chaos_audit as audit  # noqa: E402
import httpx  # noqa: E402
import memory_bench  # noqa: E402
from chaos_procs import Scene, cli  # noqa: E402
from chaos_scenarios import SCENARIOS  # noqa: E402

from optimizer.testing import reflection_app, thread_server  # noqa: E402


@dataclass(frozen=True)
class Row:
    title: str
    calls: int
    excused: int  # faults and hostile answers, and rollouts lost with a killed process
    paid_twice: int
    secrets: list[str]
    changed: int
    checked: int
    failed: list[str]

    @property
    def ok(self) -> bool:
        return not (self.paid_twice or self.secrets or self.changed or self.failed)


def play(name: str, base: Path, reflection: str) -> Row:
    """Run one scenario in its own folder and audit it."""
    title, fn = SCENARIOS[name]
    scene = Scene(name, base / name, reflection)
    for folder in (scene.ws, scene.out, scene.peers):
        folder.mkdir(parents=True)
    try:
        fn(scene)
    except (SystemExit, RuntimeError, TimeoutError, httpx.HTTPError) as exc:
        # A process that died or never answered: the scenario fails, the others still run.
        scene.check(f"the scenario could not finish: {str(exc)[-600:]}", False)
    _show_runs(scene)
    served = [call for log in scene.logs for call in audit.calls(log)]
    changed, checked = audit.scores_changed(scene.ws, scene.hostile)
    return Row(
        title=title,
        calls=len(served),
        excused=sum(1 for c in served if c.fault) + len(scene.lost),
        paid_twice=audit.paid_twice(served, scene.lost),
        secrets=audit.secrets_found([scene.ws, scene.out], scene.secrets),
        changed=changed,
        checked=checked,
        failed=scene.failed,
    )


def _show_runs(scene: Scene) -> None:
    """``runs list`` and ``runs show`` of every run: what a user would print gets grepped too."""
    if not (scene.ws / "workspace.sqlite").exists():
        return
    cli(scene, "runs", "list", "--workspace", str(scene.ws))
    runs = audit.read_workspace(scene.ws, lambda ws: ws.list_runs())
    for run in runs:
        cli(scene, "runs", "show", run.run_id, "--workspace", str(scene.ws))


def print_table(rows: list[Row]) -> None:
    head = f"{'scenario':<32} {'calls':>6} {'excused':>7} {'paid twice':>10} {'secrets found':>13} {'scores changed':>14}  verdict"
    print(head)
    print("-" * len(head))
    for row in rows:
        changed = f"{row.changed}/{row.checked}"
        verdict = "ok" if row.ok else "FAIL"
        print(
            f"{row.title:<32} {row.calls:>6} {row.excused:>7} {row.paid_twice:>10} "
            f"{len(row.secrets):>13} {changed:>14}  {verdict}"
        )
    for row in rows:
        for problem in [*row.failed, *(f"secret found: {s}" for s in row.secrets)]:
            print(f"  {row.title}: {problem}")


def memory_line() -> bool:
    """``bench/memory_bench.py``'s measurement: 16 MiB answers, concurrency 8; True if met."""
    args = argparse.Namespace(mib=16.0, shape="text", rollouts=32, concurrency=8)
    refused = memory_bench.scenario(args, None)
    accepted = memory_bench.scenario(args, 32.0)
    worst = max(refused["peak_mb"], accepted["peak_mb"])
    met = worst < memory_bench.TARGET_MB
    print(
        f"peak RSS, 16 MiB responses at concurrency 8: {refused['peak_mb']} MB with the default "
        f"cap ({refused['errors']} refused), {accepted['peak_mb']} MB with the cap raised "
        f"({accepted['ok']} accepted); target < {memory_bench.TARGET_MB} MB: "
        f"{'ok' if met else 'FAIL'}"
    )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak RSS line")
    parser.add_argument("--keep", action="store_true", help="keep the scenario folders")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    base = Path(tempfile.mkdtemp(prefix="gepa-chaos-"))
    rows = []
    with thread_server(reflection_app()) as reflection:
        for name in names:
            started = time.monotonic()
            rows.append(play(name, base, f"{reflection}/v1"))
            print(f"  ({name}: {time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    print_table(rows)
    memory_ok = args.no_memory or memory_line()
    if args.keep:
        print(f"scenario folders kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if memory_ok and all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
