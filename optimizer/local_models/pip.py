"""pip as a child process: its whole output to a log, each line to the caller as it comes.

Installs take minutes, so the caller turns pip's lines into progress (``on_line``) while the
log keeps everything, each line behind the seconds since pip started (where a slow install
spent its time). ``ModelInstallError`` is what every install step
raises: its message says what failed and where the full log is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from schemas import UserError

__all__ = ["ModelInstallError", "run_pip"]

_TAIL_LINES = 15


class ModelInstallError(UserError):
    """A model or the llama.cpp runtime could not be installed; the message says what to do."""


def run_pip(
    args: Sequence[str],
    log: Path,
    what: str,
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Run ``python -m pip ARGS``, appending its output to ``log`` and passing each line on.

    ``env`` adds variables to this process's environment (the command line written to the log
    shows them). A non-zero exit raises ``ModelInstallError`` with ``what``, the log's path and
    the last lines of the log.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        shown = " ".join(f"{k}={v!r}" for k, v in (env or {}).items())
        fh.write(f"$ {shown + ' ' if shown else ''}{python} -m pip {' '.join(args)}\n")
        fh.flush()
        started = time.monotonic()
        proc = subprocess.Popen(
            [python, "-m", "pip", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            text=True,
            errors="replace",
            bufsize=1,
        )
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                fh.write(f"{time.monotonic() - started:7.1f}s {line}")
                if on_line is not None:
                    on_line(line.rstrip("\n"))
        code = proc.wait()
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-_TAIL_LINES:])
        raise ModelInstallError(f"{what} failed (pip exit {code}); full log: {log}\n{tail}")
