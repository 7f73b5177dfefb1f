"""A dedicated virtualenv for the gepa-ai side of the race: ``gepa==0.1.4`` and ``httpx``.

The rival optimizer runs in its own interpreter so that neither its imports nor its version
pins can leak into ours (and ours cannot help it). ``bench/race_gepa.py`` runs under the
python this module returns.

Run: .venv/bin/python bench/gepa_env.py   (creates or reuses bench/.gepa-venv; progress goes to
stderr, the venv's python to stdout, so ``PY=$(.venv/bin/python bench/gepa_env.py)`` works)
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["GEPA_REQUIREMENTS", "VENV_DIR", "GepaEnvError", "ensure_gepa_python"]

VENV_DIR = Path(__file__).resolve().parent / ".gepa-venv"
GEPA_VERSION = "0.1.4"
GEPA_REQUIREMENTS = (f"gepa=={GEPA_VERSION}", "httpx")

# Asks the venv's own interpreter, so a half-built venv or a different gepa is caught.
_PROBE = (
    "import importlib.metadata as m, httpx, gepa; "
    "from gepa.strategies.proposal_sampling import PxNSampling; "
    "print(m.version('gepa'))"
)


class GepaEnvError(RuntimeError):
    """The gepa venv could not be created or provisioned; the message says what to do."""


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _is_ready(python: Path) -> bool:
    """True when ``python`` exists and imports gepa at exactly the pinned version, and httpx."""
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() == GEPA_VERSION


def _pip_install(python: Path, venv_dir: Path) -> None:
    cmd = [str(python), "-m", "pip", "install", "--quiet", *GEPA_REQUIREMENTS]
    print(
        f"[gepa-env] installing {' '.join(GEPA_REQUIREMENTS)} into {venv_dir}",
        file=sys.stderr,
        flush=True,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise GepaEnvError(
            f"pip failed (exit {proc.returncode}) installing {', '.join(GEPA_REQUIREMENTS)} "
            f"into {venv_dir}.\n--- pip output (tail) ---\n{tail}\n---\n"
            f"Fix the cause above (network or index access?), or delete {venv_dir} and rerun."
        )


def ensure_gepa_python(venv_dir: Path = VENV_DIR) -> Path:
    """Create (once) or reuse the gepa venv and return its python.

    Idempotent: a venv that already imports ``gepa`` at the pinned version is reused without
    touching the network. Safe to call from concurrent processes: they serialize on a lock
    file inside the venv directory. Raises ``GepaEnvError`` when pip or venv creation fails.
    """
    python = _venv_python(venv_dir)
    if _is_ready(python):
        print(f"[gepa-env] reusing {venv_dir} (gepa {GEPA_VERSION})", file=sys.stderr, flush=True)
        return python
    venv_dir.mkdir(parents=True, exist_ok=True)
    with open(venv_dir / ".provision.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another process may have finished the job while we waited for the lock.
        if _is_ready(python):
            print(
                f"[gepa-env] reusing {venv_dir} (gepa {GEPA_VERSION})", file=sys.stderr, flush=True
            )
            return python
        if not python.exists():
            print(
                f"[gepa-env] creating venv {venv_dir} from {sys.executable}",
                file=sys.stderr,
                flush=True,
            )
            try:
                venv.EnvBuilder(with_pip=True).create(venv_dir)
            except (OSError, subprocess.CalledProcessError) as exc:
                raise GepaEnvError(
                    f"could not create a venv at {venv_dir}: {exc}. "
                    f"Check that {sys.executable} has the venv and ensurepip modules, "
                    f"or delete {venv_dir} and rerun."
                ) from exc
        _pip_install(python, venv_dir)
        if not _is_ready(python):
            raise GepaEnvError(
                f"{python} still cannot import gepa {GEPA_VERSION} and httpx after pip "
                f"succeeded; delete {venv_dir} and rerun."
            )
    print(f"[gepa-env] ready: {python}", file=sys.stderr, flush=True)
    return python


def main() -> int:
    """Provision the venv and print its python (the only line on stdout)."""
    try:
        python = ensure_gepa_python()
    except GepaEnvError as exc:
        print(f"[gepa-env] error: {exc}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
