"""Time a fresh local-model install: new venv, empty pip cache, empty models folder.

    python bench/install_time.py                  # this checkout, the whole install
    python bench/install_time.py --steps          # each part on its own, one after another
    python bench/install_time.py --repo /tmp/old  # another checkout (an unpacked git archive)

Everything happens in a new folder (``--work``, default a temporary one, deleted at the end
unless ``--keep``): ``python3 -m venv``, ``pip install -e REPO`` with an empty
``PIP_CACHE_DIR``, then ``gepa-runtime models install`` into an empty ``GEPA_MODELS_DIR``.
The whole command is what a user waits for; its own progress lines are echoed with the bench's
clock in front. ``--steps`` instead runs the runtime, the student and the reflection model as
three separate calls of ``install_models``, so each part's time shows even where the whole
install overlaps them. The load average is printed before and after: the machine is shared,
and a loaded one builds slower.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One call of the public API per part, the same on any checkout that has ``install_models``.
STEP_CODE = {
    "runtime": "install_models(student=False, reflection=None, models_dir=D)",
    "student model (0.5B)": "install_models(student=True, reflection=None, models_dir=D, runtime=False)",
    "reflection model (1.5B)": "install_models(student=False, reflection='1.5b', models_dir=D, runtime=False)",
}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], env: dict[str, str], started: float) -> tuple[float, float]:
    """Run ``cmd`` and echo its output with the bench's clock; returns (wall, CPU) seconds.

    The CPU time counts every process below ``cmd`` (compilers included): it changes little
    with the load of the machine, which the wall time does not.
    """
    t0, cpu0 = time.monotonic(), children_cpu()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        print(f"  [{time.monotonic() - started:6.1f}s] {line.rstrip()}", flush=True)
    if proc.wait() != 0:
        sys.exit(f"failed (exit {proc.returncode}): {' '.join(cmd)}")
    return time.monotonic() - t0, children_cpu() - cpu0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to install")
    parser.add_argument("--work", type=Path, help="folder for venv, caches, models")
    parser.add_argument("--python", default="python3", help="interpreter that makes the venv")
    parser.add_argument("--steps", action="store_true", help="time each part on its own")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="gepa-install-time-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        sys.exit(f"{work} is not empty: a fresh install needs an empty folder")
    venv, models = work / "venv", work / "models"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        PIP_CACHE_DIR=str(work / "pip-cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        GEPA_MODELS_DIR=str(models),
    )
    env.pop("CMAKE_ARGS", None)
    python = str(venv / "bin" / "python")

    print(f"fresh install of {args.repo.resolve()} in {work}")
    print(f"before: {load()}", flush=True)
    started = time.monotonic()
    times: dict[str, tuple[float, float]] = {}
    times["venv"] = run([args.python, "-m", "venv", str(venv)], env, started)
    times["pip install -e ."] = run(
        [python, "-m", "pip", "install", "--quiet", "-e", str(args.repo)], env, started
    )
    if args.steps:
        for name, call in STEP_CODE.items():
            code = (
                "from pathlib import Path\n"
                "from optimizer.local_models import install_models\n"
                f"D = Path({str(models)!r})\n{call}\n"
            )
            times[name] = run([python, "-c", code], env, started)
    else:
        times["gepa-runtime models install"] = run(
            [str(venv / "bin" / "gepa-runtime"), "models", "install", "--dir", str(models)],
            env,
            started,
        )
    total = time.monotonic() - started
    print(f"after: {load()}")
    print(f"\n  {'breakdown':<30} {'wall':>8} {'CPU':>8}")
    for name, (wall, cpu) in times.items():
        print(f"  {name:<30} {wall:7.1f}s {cpu:7.1f}s")
    cpu = sum(c for _, c in times.values())
    print(f"  {'total':<30} {total:7.1f}s {cpu:7.1f}s   ({total / 60:.1f} min wall)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
