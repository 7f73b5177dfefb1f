"""The race: gepa-runtime against gepa-ai/gepa 0.1.4 on identical work, one table out.

    .venv/bin/python bench/race.py                       # 3 simulated tasks x 3 seeds, 4 contestants
    .venv/bin/python bench/race.py --tasks additive --seeds 0 --time-scale 0.25   # a quick look
    .venv/bin/python bench/race.py --tasks banking77 --seeds 0,1,2                # the real task

Identical work: every contestant of a (task, seed) talks to the same container process and
the same reflection server, with the same concurrency and the same total container calls
(gepa-ai gets ``--gepa-budget`` for its search plus its holdout calls, the baseline and its
best on every holdout seed; gepa-runtime gets ``--max-metric-calls`` equal to that sum).
Contestants run one after another; the counters of both servers are reset in between.

- ``ours-1`` / ``ours-4``: ``gepa-runtime optimize run`` with 1 and 4 proposals in flight
  (text-mode proposer);
- ``gepa-seq`` / ``gepa-pxn``: gepa-ai 0.1.4's ``optimize`` with its defaults, and with
  ``PxNSampling(2, 2)`` whose reflections overlap through the LM's ``batch_complete``
  (``bench/race_gepa.py``, run in its own venv made by ``bench/gepa_env.py``).

Simulated tasks (``bench/race_tasks.py``): ``additive``, ``interacting``, ``noisy``, the
container answering in ``--latency`` seconds; the simulated hosted reflection model
(``bench/race_reflector.py``) answers in ``--reflection-latency`` seconds, concurrently.
``banking77`` is the README's main job: the real Banking77 container on the local 0.5B student
with the local 1.5B reflection model (one llama.cpp server each), its splits, budget,
concurrency and proposer flags read from ``examples/banking77/design.py``; its default
contestants are ``gepa-seq``, ``ours-N`` (N proposals in flight, as the main job),
``mipro-1`` (``optimize run --method mipro`` on the same budget) and ``dspy-mipro`` (DSPy's
MIPROv2 on the same student, prompt model, splits and student calls: ``bench/race_dspy.py``;
its ``calls`` are student calls).

``--reflection-errors realistic`` makes the simulated reflection model err as real ones do
(answers that make the text worse, fix several things, rewrite it, or ignore the format:
``bench/race_reflector.py``); the task column then says ``+realistic``.

Columns: wall seconds; container calls (counted by the container); reflection calls (counted
by the reflection server); heldout accuracy of the baseline and of the winner; the seconds
until the run first reached the final train score of gepa-ai sequential on the same seed
("-" when it never did); for gepa-runtime, the share of its budget left unspent; the
contestant process's CPU seconds (user + system) and peak resident memory.

Our packages are byte-compiled before the first run (``compileall``, as ``pip install`` does
for a wheel; gepa-ai's installed modules already are). Without it, on a machine with
``PYTHONDONTWRITEBYTECODE`` set, every run of ours would compile the checkout's changed modules
from source and count that CPU as the optimizer's; ``--no-compile`` leaves them as they are.

gepa-ai on ``banking77`` needs more than 80 minutes per seed on the local 1.5B. With
``--keep DIR --gepa-resume`` its state is saved in ``DIR`` after every iteration (gepa's
``run_dir``), and the same command run again resumes a stopped run; its wall column then adds
up the sessions' search time, and its CPU column counts the last session only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gepa_env import ensure_gepa_python  # noqa: E402

from examples.processes import serving_process, stop_process  # noqa: E402
from optimizer.local_models import free_port  # noqa: E402
from workspace import Workspace  # noqa: E402

SIMULATED = ("additive", "interacting", "noisy")
CONTESTANTS = ("gepa-seq", "ours-1", "ours-4", "gepa-pxn")
DUMMY_KEY = "sk-race-no-key"


@dataclass
class Result:
    """One contestant's run on one (task, seed)."""

    task: str
    seed: int
    contestant: str
    wall_s: float
    container_calls: int
    reflection_calls: int
    holdout_baseline: float | None
    holdout_best: float | None
    train_best: float | None
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (s since start, best)
    budget: int | None = None
    paid: int | None = None
    stop_reason: str = ""
    max_reflections_in_flight: int | None = None
    to_target_s: float | None = None
    cpu_s: float | None = None  # the contestant's process: user + system seconds
    peak_rss_mb: float | None = None  # its largest resident set
    errors: str = "none"  # the simulated reflection model's error mix (--reflection-errors)


# processes


@dataclass(frozen=True)
class Finished:
    """A contestant's process: exit code, output, CPU seconds and peak resident memory."""

    returncode: int
    stderr: str
    cpu_s: float
    peak_rss_mb: float


OUR_PACKAGES = ("schemas", "transport", "container", "workspace", "proposer", "optimizer")


def byte_compile() -> None:
    """Compile our packages as a wheel install would, so no run pays for it (see above)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *(str(ROOT / p) for p in OUR_PACKAGES)],
        check=True,
    )


def _peak_rss_mb(pid: int) -> float | None:
    """A live process's peak resident set (``VmHWM``) in MiB; None once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) / 1024 if found else None


def _measured(cmd: Sequence[str], env: dict[str, str]) -> Finished:
    """Run ``cmd`` to the end; its own CPU time comes from ``os.wait4``, its peak RSS from
    ``/proc/<pid>/status`` read every 50 ms while it runs.

    ``ru_maxrss`` from ``os.wait4`` is no good for the RSS: Linux starts a child's count at
    its parent's peak when it forks, so it reported the race's own resident set whenever that
    was the larger (it grew from 49 to 60 MB over a race, and every contestant "peaked" at
    it). ``VmHWM`` is the exec'd program's own (``Popen`` returns after the exec); a
    process that ends within 50 ms is read once, as it starts.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env, stdout=out, stderr=err)
        peak, done = _peak_rss_mb(proc.pid) or 0.0, threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.wait(0.05):
                peak = max(peak, _peak_rss_mb(proc.pid) or 0.0)

        watcher = threading.Thread(target=watch, name="peak-rss", daemon=True)
        watcher.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # the race was stopped (Ctrl-C, SIGTERM): so is the contestant
            stop_process(proc)
            raise
        finally:
            done.set()
            watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return Finished(
            returncode=proc.returncode,
            stderr=err.read().decode(errors="replace"),
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mb=peak,
        )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM ends the race as Ctrl-C does: every process it started is stopped first."""
    raise SystemExit(128 + signum)


@dataclass
class Arena:
    """Where a (task, seed) is raced: the container and reflection endpoints."""

    task: str
    seed: int
    container: str
    reflection: str  # OpenAI-compatible base URL (ends in /v1)
    reflection_model: str
    gepa_budget: int
    holdout: int
    concurrency: int
    counted: bool  # the servers count calls (/stats, /reset): the simulated ones do
    ours_extra: tuple[str, ...] = ()
    ours_flags: tuple[str, ...] = ()  # --ours-flags: what a user may pass too
    errors: str = "none"  # the simulated reflection model's error mix
    reflection_max_tokens: int = 2048
    env: dict[str, str] = field(default_factory=dict)

    def reset(self) -> None:
        if self.counted:
            httpx.post(f"{self.container}/reset", timeout=10).raise_for_status()
            httpx.post(f"{self.reflection[: -len('/v1')]}/reset", timeout=10).raise_for_status()

    def stats(self) -> tuple[int, int, int]:
        """(container calls, reflection calls, most reflections in flight at once)."""
        rollouts = httpx.get(f"{self.container}/stats", timeout=10).json()
        refl = httpx.get(f"{self.reflection[: -len('/v1')]}/stats", timeout=10).json()
        return rollouts.get("rollouts", 0), refl["calls"], refl["max_in_flight"]


# contestants


def checkout_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``: a contestant of ours runs the code
    of the checkout the race lives in.

    The venv's ``gepa-runtime`` script imports the packages its install points at, whatever
    the working directory: a git worktree sharing the main checkout's venv would otherwise race
    the main checkout's code under the worktree's name.
    """
    path = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def our_flags(arena: Arena, in_flight: int, method: str = "gepa") -> list[str]:
    """The run-config flags of ``ours-N`` in ``arena`` (``optimize run``'s and ``plan``'s)."""
    return [
        "--container",
        arena.container,
        "--reflection-model",
        arena.reflection_model,
        "--reflection-base-url",
        arena.reflection,
        "--proposer-mode",
        "text",
        "--reflection-max-tokens",
        str(arena.reflection_max_tokens),
        "--concurrency",
        str(arena.concurrency),
        "--proposals-in-flight",
        str(in_flight),
        "--seed",
        str(arena.seed),
        "--max-metric-calls",
        str(arena.gepa_budget + 2 * arena.holdout),
        "--method",
        method,
        *arena.ours_extra,
        *arena.ours_flags,
    ]


def run_ours(arena: Arena, in_flight: int, workdir: Path, method: str = "gepa") -> Result:
    """``gepa-runtime optimize run --method METHOD`` with ``in_flight`` proposals, in a fresh
    workspace; the contestant is ``ours-N`` for GEPA and ``mipro-N`` for MIPRO."""
    name = f"{'ours' if method == 'gepa' else method}-{in_flight}"
    workspace = workdir / name
    budget = arena.gepa_budget + 2 * arena.holdout
    cmd = [
        str(ROOT / ".venv" / "bin" / "gepa-runtime"),
        "optimize",
        "run",
        "--quiet",
        "--workspace",
        str(workspace),
        *our_flags(arena, in_flight, method),
    ]
    arena.reset()
    started, t0 = time.time(), time.monotonic()
    done = _measured(cmd, checkout_env({**os.environ, **arena.env}))
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    packet = json.loads(next(workspace.glob("runs/*/evidence.json")).read_text())
    timeline = asyncio.run(_our_timeline(workspace, packet["run_id"], started))
    calls, reflections, most = (
        arena.stats()
        if arena.counted
        else (
            packet["rollouts"]["paid"],
            packet["usage"]["proposer"].get("calls", 0),
            None,
        )
    )
    return Result(
        task=arena.task,
        seed=arena.seed,
        contestant=name,
        wall_s=wall,
        container_calls=calls,
        reflection_calls=reflections,
        holdout_baseline=packet["baseline"]["holdout"],
        holdout_best=packet["best"]["holdout"],
        train_best=max((m for _, m in timeline), default=None),
        timeline=timeline,
        budget=budget,
        paid=packet["rollouts"]["paid"],
        stop_reason=packet.get("stop_reason") or "",
        max_reflections_in_flight=most,
        cpu_s=done.cpu_s,
        peak_rss_mb=done.peak_rss_mb,
        errors=arena.errors,
    )


async def _our_timeline(workspace: Path, run_id: str, started: float) -> list[tuple[float, float]]:
    """(seconds since the process started, best full-train mean so far) at each new best."""
    out: list[tuple[float, float]] = []
    async with Workspace(workspace) as ws:
        after = 0
        while batch := await ws.events_since(run_id, after, 1000):
            after = batch[-1].seq
            for event in batch:
                data = event.data
                if (
                    event.type == "scored"
                    and data.get("split") == "train"
                    and data.get("mean") is not None
                ) and (not out or data["mean"] > out[-1][1]):
                    out.append((event.ts - started, float(data["mean"])))
    return out


def run_gepa(arena: Arena, mode: str, python: Path, workdir: Path, resume: bool = False) -> Result:
    """gepa-ai 0.1.4 through ``bench/race_gepa.py`` in its own venv.

    With ``resume``, gepa keeps its state in ``workdir`` and a stopped run picks up from it;
    the wall time then includes the earlier sessions' search (``race_clock.RunClock``).
    """
    out = workdir / f"gepa-{mode}.json"
    cmd = [
        str(python),
        str(ROOT / "bench" / "race_gepa.py"),
        "--container",
        arena.container,
        "--reflection-base-url",
        arena.reflection,
        "--reflection-model",
        arena.reflection_model,
        "--reflection-max-tokens",
        str(arena.reflection_max_tokens),
        "--max-metric-calls",
        str(arena.gepa_budget),
        "--concurrency",
        str(arena.concurrency),
        "--seed",
        str(arena.seed),
        "--mode",
        mode,
        "--out",
        str(out),
        *(["--run-dir", str(workdir / f"gepa-{mode}-state")] if resume else []),
    ]
    arena.reset()
    started, t0 = time.time(), time.monotonic()
    done = _measured(cmd, {**os.environ, **arena.env})
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"gepa-{mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    data = json.loads(out.read_text())
    wall += data.get("earlier_s", 0.0)
    # The runner's clock starts after its imports: shift its timeline onto the process's.
    offset = data["started_at"] - started if "started_at" in data else 0.0
    timeline: list[tuple[float, float]] = []
    for t, mean in data["timeline"]:
        if not timeline or mean > timeline[-1][1]:
            timeline.append((t + offset, mean))
    calls, reflections, most = (
        arena.stats()
        if arena.counted
        else (
            data["container_calls_made"],
            data["reflection_calls"],
            None,
        )
    )
    return Result(
        task=arena.task,
        seed=arena.seed,
        contestant=f"gepa-{mode}",
        wall_s=wall,
        container_calls=calls,
        reflection_calls=reflections,
        holdout_baseline=data["holdout_baseline"],
        holdout_best=data["holdout_best"],
        train_best=data["train_best"],
        timeline=timeline,
        max_reflections_in_flight=most,
        cpu_s=done.cpu_s,
        peak_rss_mb=done.peak_rss_mb,
        errors=arena.errors,
    )


def run_dspy(arena: Arena, workdir: Path) -> Result:
    """DSPy's MIPROv2 through ``bench/race_dspy.py`` (banking77 only: it calls the student).

    A user-level comparison: DSPy's own prompt format, the same student, prompt model, splits
    and student-call budget. Its ``calls`` are student calls (DSPy has no container).
    """
    if "OPENAI_BASE_URL" not in arena.env:
        raise SystemExit("dspy-mipro runs on banking77 only (it calls the student itself)")
    out = workdir / "dspy-mipro.json"
    cmd = [
        str(ROOT / ".venv" / "bin" / "python"),
        str(ROOT / "bench" / "race_dspy.py"),
        "--student-base-url", arena.env["OPENAI_BASE_URL"],
        "--reflection-base-url", arena.reflection,
        "--reflection-max-tokens", str(arena.reflection_max_tokens),
        "--max-metric-calls", str(arena.gepa_budget + 2 * arena.holdout),
        "--concurrency", str(arena.concurrency),
        "--seed", str(arena.seed),
        "--out", str(out),
    ]  # fmt: skip
    t0 = time.monotonic()
    done = _measured(cmd, {**os.environ, **arena.env})
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"dspy-mipro failed ({done.returncode}):\n{done.stderr[-3000:]}")
    data = json.loads(out.read_text())
    return Result(
        task=arena.task,
        seed=arena.seed,
        contestant="dspy-mipro",
        wall_s=wall,
        container_calls=data["student_calls"],
        reflection_calls=data["reflection_calls"],
        holdout_baseline=data["holdout_baseline"],
        holdout_best=data["holdout_best"],
        train_best=data["train_best"],
        budget=arena.gepa_budget + 2 * arena.holdout,
        paid=data["student_calls"],
        cpu_s=done.cpu_s,
        peak_rss_mb=done.peak_rss_mb,
    )


def run_one(
    arena: Arena,
    contestant: str,
    gepa_python: Path | None,
    workdir: Path,
    gepa_resume: bool = False,
) -> Result:
    """Dispatch on the contestant's name."""
    kind, _, arg = contestant.partition("-")
    if kind == "ours":
        return run_ours(arena, int(arg), workdir)
    if kind == "mipro":
        return run_ours(arena, int(arg), workdir, method="mipro")
    if contestant == "dspy-mipro":
        return run_dspy(arena, workdir)
    assert gepa_python is not None
    return run_gepa(arena, arg, gepa_python, workdir, resume=gepa_resume)


# arenas


@contextlib.contextmanager
def simulated(task: str, seed: int, args: argparse.Namespace) -> Iterator[Arena]:
    """The simulated container and hosted reflection model for one (task, seed)."""
    cport, rport = free_port(), free_port()
    py = str(ROOT / ".venv" / "bin" / "python")
    container = [
        py, str(ROOT / "bench" / "race_tasks.py"), "--task", task, "--port", str(cport),
        "--latency", str(args.latency * args.time_scale), "--seed", str(seed),
    ]  # fmt: skip
    reflector = [
        py, str(ROOT / "bench" / "race_reflector.py"), "--port", str(rport),
        "--latency", str(args.reflection_latency * args.time_scale),
        *_error_flags(args.reflection_errors),
    ]  # fmt: skip
    with (
        serving_process(
            container, dict(os.environ), f"http://127.0.0.1:{cport}/health", f"the {task} container"
        ),
        serving_process(
            reflector,
            dict(os.environ),
            f"http://127.0.0.1:{rport}/stats",
            "the simulated reflection model",
        ),
    ):
        program = httpx.get(f"http://127.0.0.1:{cport}/program", timeout=10).json()
        yield Arena(
            task=task,
            seed=seed,
            container=f"http://127.0.0.1:{cport}",
            reflection=f"http://127.0.0.1:{rport}/v1",
            reflection_model="sim",
            gepa_budget=args.gepa_budget or 300,
            holdout=len(program["seeds"]["holdout"]),
            concurrency=args.concurrency or 8,
            counted=True,
            # The simulated reflection model stands for a hosted API, though it listens here.
            ours_extra=("--reflection-endpoint", "hosted"),
            env={"OPENAI_API_KEY": DUMMY_KEY},
            errors=args.reflection_errors,
        )


def _error_flags(spec: str) -> list[str]:
    """``race_reflector.py`` flags for ``--reflection-errors`` (a preset, or mode=rate,...)."""
    if spec in ("none", "realistic"):
        return ["--errors", spec]
    flags = {"worse": "--worse-rate", "multi": "--multi-fix-rate", "rewrite": "--rewrite-rate"}
    flags["off"] = "--off-format-rate"
    out: list[str] = []
    for part in spec.split(","):
        mode, _, rate = part.partition("=")
        if mode not in flags or not rate:
            raise SystemExit(
                f"--reflection-errors: {part!r} is not mode=rate with mode one of "
                f"{', '.join(flags)} (or use the preset none or realistic)"
            )
        out += [flags[mode], rate]
    return out


@contextlib.contextmanager
def banking77(seed: int, args: argparse.Namespace) -> Iterator[Arena]:
    """The README's main job as an arena: its container, local models and design.

    Splits, budget, concurrency and proposer flags come from ``examples/banking77/design.py``
    (what ``examples/banking77/main_job.py`` runs); ``--gepa-budget`` and ``--concurrency``
    override them for a quicker look.
    """
    from examples.banking77.design import DESIGN
    from optimizer.local_models import install_models, serve_models

    install_models(student=True, reflection="1.5b")
    with serve_models(
        student_port=free_port(),
        reflection_port=free_port(),
        reflection="1.5b",
        student_slots=DESIGN.concurrency,
    ) as m:
        assert m.reflection is not None
        env = {
            "OPENAI_API_KEY": DUMMY_KEY,
            "OPENAI_BASE_URL": m.student.base_url,
            "GEPA_STUDENT_MODEL": "student",
        }
        port = free_port()
        cmd = [
            str(ROOT / ".venv" / "bin" / "python"), "-m", "examples.banking77", "--port", str(port),
            *DESIGN.container_args(seed),
        ]  # fmt: skip
        container = f"http://127.0.0.1:{port}"
        with serving_process(
            cmd, {**os.environ, **env}, f"{container}/health", "the Banking77 container"
        ):
            seeds = httpx.get(f"{container}/program", timeout=30).json()["seeds"]
            train, holdout = len(seeds["train"]), len(seeds["holdout"])
            # ours pays its holdout calls (baseline and best) from the main job's budget
            ours_budget = DESIGN.metric_calls(
                train=train, holdout=holdout, val=len(seeds.get("val") or [])
            )
            yield Arena(
                task="banking77",
                seed=seed,
                container=container,
                reflection=m.reflection.base_url,
                reflection_model="reflection",
                gepa_budget=args.gepa_budget or ours_budget - 2 * holdout,
                holdout=holdout,
                concurrency=args.concurrency or DESIGN.concurrency,
                counted=False,
                ours_extra=("--proposer-mode", DESIGN.proposer_mode, *DESIGN.proposer_args()),
                reflection_max_tokens=DESIGN.reflection_max_tokens,
                env=env,
            )


def banking77_contestants() -> list[str]:
    """The default contestants on banking77: gepa-ai, ours as the main job runs, our MIPRO,
    DSPy's MIPROv2."""
    from examples.banking77.design import DESIGN

    return ["gepa-seq", f"ours-{DESIGN.proposals_in_flight}", "mipro-1", "dspy-mipro"]


# the table


def _with_targets(results: list[Result]) -> None:
    """Seconds until each run first reached gepa-seq's final train score on its seed."""
    for r in results:
        ref = next(
            (
                x
                for x in results
                if x.contestant == "gepa-seq" and (x.task, x.seed) == (r.task, r.seed)
            ),
            None,
        )
        if ref is None or ref.train_best is None:
            continue
        r.to_target_s = next((t for t, m in r.timeline if m >= ref.train_best - 1e-9), None)


def _fmt(values: Sequence[float | None], digits: int = 3) -> str:
    got = [v for v in values if v is not None]
    return f"{statistics.mean(got):.{digits}f}" if got else "-"


def _label(r: Result) -> str:
    return r.task if r.errors == "none" else f"{r.task}+{r.errors}"


def table(results: list[Result]) -> str:
    """Per-run rows, then per (task, contestant) means."""
    lines = [
        f"{'task':<12} {'run':<9} {'seed':>4} {'wall s':>7} {'calls':>6} {'refl':>5} "
        f"{'heldout base -> best':>21} {'train best':>10} {'t->target':>9} {'unspent':>7}"
        f" {'cpu s':>6} {'rss MB':>6}",
    ]
    for r in results:
        unspent = f"{(r.budget - r.paid) / r.budget:.1%}" if r.budget and r.paid is not None else ""
        target = f"{r.to_target_s:.1f}" if r.to_target_s is not None else "-"
        lines.append(
            f"{_label(r):<12} {r.contestant:<9} {r.seed:>4} {r.wall_s:>7.1f} {r.container_calls:>6} "
            f"{r.reflection_calls:>5} {_fmt([r.holdout_baseline]):>10} -> {_fmt([r.holdout_best]):<8}"
            f" {_fmt([r.train_best]):>10} {target:>9} {unspent:>7}"
            f" {_fmt([r.cpu_s], 2):>6} {_fmt([r.peak_rss_mb], 0):>6}"
        )
    lines += ["", "means over seeds:"]
    lines.append(
        f"{'task':<12} {'run':<9} {'n':>4} {'wall s':>7} {'calls':>6} {'refl':>5} "
        f"{'heldout base -> best':>21} {'train best':>10} {'t->target':>9} {'reached':>7}"
        f" {'cpu s':>6} {'rss MB':>6}"
    )
    keys = list(dict.fromkeys((_label(r), r.contestant) for r in results))
    for task, contestant in keys:
        group = [r for r in results if (_label(r), r.contestant) == (task, contestant)]
        reached = [r.to_target_s for r in group if r.to_target_s is not None]
        lines.append(
            f"{task:<12} {contestant:<9} {len(group):>4} {_fmt([r.wall_s for r in group], 1):>7} "
            f"{_fmt([r.container_calls for r in group], 0):>6} {_fmt([r.reflection_calls for r in group], 0):>5} "
            f"{_fmt([r.holdout_baseline for r in group]):>10} -> {_fmt([r.holdout_best for r in group]):<8}"
            f" {_fmt([r.train_best for r in group]):>10} {_fmt(reached, 1):>9} {len(reached)}/{len(group):<5}"
            f" {_fmt([r.cpu_s for r in group], 2):>6} {_fmt([r.peak_rss_mb for r in group], 0):>6}"
        )
    return "\n".join(lines)


def _lineup(contestants: Sequence[str]) -> list[str]:
    """The contestants in running order: gepa-seq, the reference for time-to-target, first."""
    kinds = ("ours", "mipro", "gepa", "dspy")
    unknown = [c for c in contestants if c.partition("-")[0] not in kinds]
    if unknown:
        raise SystemExit(
            f"--contestants: unknown {unknown}; e.g. ours-1, ours-4, mipro-1, gepa-seq, dspy-mipro"
        )
    rest = [c for c in contestants if c != "gepa-seq"]
    return ["gepa-seq", *rest] if "gepa-seq" in contestants else rest


def _seeds(spec: str) -> list[int]:
    """``--seeds``: comma-separated seeds and ranges (``0,1,2``, ``10-33``, ``0,5-7``)."""
    seeds: list[int] = []
    try:
        for part in spec.split(","):
            first, _, last = part.strip().partition("-")
            seeds.extend(range(int(first), int(last or first) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{spec!r}: give seeds as numbers and ranges, e.g. 0,1,2 or 10-33"
        ) from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"{spec!r}: no seeds (a range must not run backwards)")
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default=",".join(SIMULATED), help="comma-separated; or banking77"
    )
    parser.add_argument(
        "--seeds", type=_seeds, default="0,1,2", help="race seeds: 0,1,2 or a range, 10-33"
    )
    parser.add_argument(
        "--contestants",
        default=None,
        help=f"comma-separated (default {','.join(CONTESTANTS)}; banking77 gepa-seq,ours-1,"
        "mipro-1,dspy-mipro: ours-N as the main job runs it)",
    )
    parser.add_argument(
        "--gepa-budget",
        type=int,
        default=None,
        help="gepa-ai's max_metric_calls (default 300; banking77: the main job's budget less "
        "2 x holdout, examples/banking77/design.py)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="default 8; banking77: the main job's"
    )
    parser.add_argument("--latency", type=float, default=0.3, help="container seconds per rollout")
    parser.add_argument(
        "--reflection-latency", type=float, default=4.0, help="seconds per reflection call"
    )
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiplies both latencies")
    parser.add_argument(
        "--reflection-errors",
        default="none",
        help="the simulated reflection model's errors: none (default), realistic (25%% worse, "
        "15%% multi-fix, 10%% rewrite, 5%% off-format) or e.g. worse=0.25,multi=0.15,rewrite=0.1,off=0.05",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every result here")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep every workspace under this folder (default: a temporary one, removed)",
    )
    parser.add_argument(
        "--gepa-resume",
        action="store_true",
        help="with --keep: gepa-ai saves its state there after every iteration, and the same"
        " command run again resumes a stopped gepa-ai run (for runs longer than a sitting)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="do not byte-compile our packages first (see above)",
    )
    parser.add_argument(
        "--ours-flags",
        default="",
        help="extra `optimize run` flags for ours, e.g. '--use-merge false'",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if args.gepa_resume and not args.keep:
        parser.error("--gepa-resume needs --keep DIR: gepa-ai's state is kept in that folder")
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in (*SIMULATED, "banking77")]
    if unknown:
        parser.error(f"--tasks: unknown {unknown}; choose from {', '.join(SIMULATED)}, banking77")
    chosen = [c for c in (args.contestants or "").split(",") if c]
    lineups = {
        task: _lineup(chosen or (banking77_contestants() if task == "banking77" else CONTESTANTS))
        for task in tasks
    }
    needs_gepa = any(c.startswith("gepa") for lineup in lineups.values() for c in lineup)
    gepa_python = ensure_gepa_python() if needs_gepa else None
    if not args.no_compile:
        byte_compile()
    results: list[Result] = []
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    folder = (
        contextlib.nullcontext(str(args.keep))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="race-")
    )
    with folder as tmp:
        for task in tasks:
            for seed in args.seeds:
                arena_cm = (
                    banking77(seed, args) if task == "banking77" else simulated(task, seed, args)
                )
                with arena_cm as arena:
                    arena.ours_flags = tuple(shlex.split(args.ours_flags))
                    for contestant in lineups[task]:
                        if task == "banking77" and contestant == "gepa-pxn":
                            continue  # one llama.cpp server answers one request at a time
                        workdir = Path(tmp) / f"{task}-{seed}"
                        workdir.mkdir(exist_ok=True)
                        result = run_one(arena, contestant, gepa_python, workdir, args.gepa_resume)
                        results.append(result)
                        print(
                            f"[race] {task} seed {seed} {contestant}: {result.wall_s:.1f}s, "
                            f"{result.container_calls} calls, heldout "
                            f"{_fmt([result.holdout_baseline])} -> {_fmt([result.holdout_best])}",
                            flush=True,
                        )
    _with_targets(results)
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
