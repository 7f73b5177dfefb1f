"""Running the external agent's command: its environment, its time limit, what it spent.

The command is the operator's shell command line (``/bin/sh -c``), run in the proposal
folder in a new session, so that on timeout, cancellation or exit its whole process group
is killed: a coding agent starts helpers (language servers, shells) that must not outlive
the proposal nor write into the folder after it was read back.

Its environment holds no secret but the ones named (``--proposer-env NAME``): a fixed set
of harmless variables (``PATH``, ``HOME``, locale, terminal), the named ones, and
``GEPA_PROPOSAL_DIR`` / ``GEPA_TASK_FILE`` / ``GEPA_COMPONENT_FILES`` / ``GEPA_PROPOSAL_LOGS``
(a folder outside the proposal where the agent may keep its own files; ``TMPDIR`` too), and
``GEPA_NOTES_FILE`` (``NOTES.md``) when the person running the optimization left notes.

What it spent is read, in this order, from ``usage.json`` in the folder, else from the last
line of its output that is a JSON object with usage figures (``cost_usd`` or
``total_cost_usd``; ``input_tokens`` / ``output_tokens`` at the top or under ``usage``:
Claude Code's ``--output-format json`` and Codex's ``exec --json`` lines qualify). What it
does not report is recorded as unknown (``ModelUsage.usage_unknown`` / ``cost_unknown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.exceptions import ProposalRejected
from schemas.usage import ModelUsage

__all__ = ["BASE_ENV", "CommandResult", "agent_environment", "read_usage", "run_command"]

# Variables a command needs to start and that carry no credential.
BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "SHELL",
)
KILL_GRACE_S = 5.0
_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class CommandResult:
    """A finished command: its exit status and where its output went."""

    returncode: int
    stdout: Path
    stderr: Path

    def stderr_tail(self, chars: int = 400) -> str:
        """The end of what it wrote on stderr (or stdout when stderr is empty)."""
        for path in (self.stderr, self.stdout):
            text = _tail(path).strip()
            if text:
                return text[-chars:]
        return "(no output)"


def agent_environment(
    names: Sequence[str], extra: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The command's environment: ``BASE_ENV``, the ``names`` asked for, then ``extra``."""
    env = os.environ if environ is None else environ
    out = {k: env[k] for k in BASE_ENV if k in env}
    out.update({k: env[k] for k in names if k in env})
    out.update(extra)
    return out


async def run_command(
    command: str, *, cwd: Path, env: Mapping[str, str], timeout_s: float, logs: Path
) -> CommandResult:
    """Run ``command`` in ``cwd``; ``ProposalRejected("timeout")`` when it overruns.

    Its process group is killed in every case once the command is over (or cancelled).
    """
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            raise ProposalRejected(
                "timeout",
                f"the proposer command did not finish within {timeout_s:g} s and was killed "
                "with its process group; raise --proposer-timeout",
            ) from None
        finally:
            await _kill_group(proc)
    return CommandResult(proc.returncode if proc.returncode is not None else -1, out, err)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the command's process group, then SIGKILL what is left after a grace time."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)
    # Helpers it started in the background may still run in its group: end them too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        await proc.wait()


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _figures(data: Mapping[str, Any]) -> tuple[int | None, int | None, float | None, int | None]:
    """(input tokens, output tokens, cost, calls) found in one JSON object, None if absent."""
    usage = data.get("usage")
    nested: Mapping[str, Any] = usage if isinstance(usage, Mapping) else {}
    tokens = []
    for key in ("input_tokens", "output_tokens"):
        value = _number(data.get(key, nested.get(key)))
        tokens.append(None if value is None else int(value))
    cost = _number(data.get("cost_usd", data.get("total_cost_usd")))
    calls = _number(data.get("calls"))
    return tokens[0], tokens[1], cost, None if calls is None else int(calls)


def _reported(folder: Path, stdout: Path) -> Mapping[str, Any] | None:
    usage_file = folder / "usage.json"
    if usage_file.is_file() and not usage_file.is_symlink():
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(usage_file.read_text(encoding="utf-8"))
            if isinstance(data, Mapping):
                return data
    for line in reversed(_tail(stdout).splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, Mapping) and any(x is not None for x in _figures(data)[:3]):
                return data
    return None


def read_usage(folder: Path, stdout: Path) -> ModelUsage:
    """What one run of the command spent, as reported; unreported parts counted as unknown."""
    data = _reported(folder, stdout)
    tin, tout, cost, calls = _figures(data) if data is not None else (None, None, None, None)
    known_tokens = tin is not None or tout is not None
    return ModelUsage(
        calls=calls if calls is not None else 1,
        input_tokens=tin or 0,
        output_tokens=tout or 0,
        cost_usd=cost or 0.0,
        usage_unknown=0 if known_tokens else 1,
        cost_unknown=0 if cost is not None else 1,
    )
