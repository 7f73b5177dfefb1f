"""An external coding agent (Codex, Claude Code, aider, a script) as the proposer.

``--proposer-command "CMD ..."`` replaces the built-in reflection loop: for each proposal
the runtime writes a folder from the same ``Brief`` and evidence the built-in proposer uses
(``proposer.agent_folder``), runs the command there (``proposer.agent_command``: a time
limit, its process group killed, no secret but the ones named), reads the edited
component files back and applies the usual guards (``proposer.guards``). A refusal is a
``ProposalRejected`` with its usage, as for the built-in proposer: the search records it and
goes on. Folders are kept under ``work_dir`` for whoever wants to see what the agent saw.

    proposer = ExternalProposer(ExternalConfig.from_run_config(cfg, work_dir=run_dir / "proposals"))
    proposal = await proposer.propose(request)      # same interface as proposer.Proposer
"""

from __future__ import annotations

import itertools
import os
import random
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from proposer.agent_command import agent_environment, read_usage, run_command
from proposer.agent_folder import NOTES_FILE, AgentFolder
from proposer.base import BaseProposer, Spent, Written
from proposer.brief import Brief
from proposer.proposer import Proposer
from proposer.types import ProposerConfig
from schemas.config import RunConfig
from schemas.exceptions import ProposalRejected, UserError
from schemas.usage import ModelUsage

__all__ = [
    "ExternalConfig",
    "ExternalProposer",
    "check_proposer_command",
    "command_problem",
    "command_secrets",
    "proposer_for",
]

_RATIONALE_CHARS = 1000
_MIN_SECRET_CHARS = 6  # shorter values (a "1", a "true") would mask ordinary words


@dataclass(frozen=True)
class ExternalConfig:
    """The command, the environment variables it may see, its time limit and the length cap.

    ``work_dir`` holds one folder per proposal (a temporary folder when None).
    """

    command: str
    env_names: tuple[str, ...] = ()
    timeout_s: float = 900.0
    max_prompt_chars: int = 6000
    work_dir: Path | None = None

    @classmethod
    def from_run_config(cls, cfg: RunConfig, *, work_dir: Path | None = None) -> ExternalConfig:
        """The external proposer part of a run config; ``UserError`` when it cannot run."""
        if not cfg.proposer_command:
            raise UserError('no proposer command: pass --proposer-command "CMD ..."')
        check_proposer_command(cfg)
        return cls(
            command=cfg.proposer_command or "",
            env_names=tuple(cfg.proposer_env),
            timeout_s=cfg.proposer_timeout_s,
            max_prompt_chars=cfg.max_prompt_chars,
            work_dir=work_dir,
        )


def check_proposer_command(cfg: RunConfig) -> None:
    """``UserError`` naming the flag when ``--proposer-command`` cannot be used as given."""
    if not cfg.proposer_command:
        return
    if cfg.method == "mipro":
        raise UserError(
            "--proposer-command works with --method gepa only: MIPRO asks its proposer for "
            "instruction sets, which the command does not write; drop one of the two"
        )
    missing = [n for n in cfg.proposer_env if n not in os.environ]
    if missing:
        raise UserError(
            f"--proposer-env {missing[0]}: ${missing[0]} is not set in this environment; "
            "export it or drop the flag"
        )
    problem = command_problem(cfg.proposer_command)
    if problem:
        raise UserError(f"--proposer-command: {problem}")


def command_problem(command: str) -> str | None:
    """Why ``command`` cannot start (its program is not on PATH), or None when it can."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"{command!r} is not a valid shell command line ({exc})"
    programs = [w for w in words if "=" not in w.split("/")[0]]  # skip VAR=value prefixes
    if not programs:
        return "the command is empty"
    program = programs[0]
    if any(c in program for c in "$`()|;&<>"):
        return None  # shell syntax: only the shell can tell
    if shutil.which(program) is None:
        return f"{program!r} is not found on PATH (nor as an executable file)"
    return None


class ExternalProposer(BaseProposer[Spent]):
    """A ``ProposerLike`` that hands each proposal to an external command.

    ``total_usage`` counts every proposal, accepted or refused, as the command reported it.
    """

    def __init__(self, config: ExternalConfig, *, rng: random.Random | None = None) -> None:
        super().__init__(max_prompt_chars=config.max_prompt_chars)
        self.config = config
        self._rng = rng if rng is not None else random.Random(0)
        self._count = itertools.count(1)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    async def aclose(self) -> None:
        """Remove the temporary folder, if one was made (``work_dir`` folders are kept)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _root(self) -> Path:
        if self.config.work_dir is not None:
            return self.config.work_dir
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gepa-proposals-")
        return Path(self._tmp.name)

    def _new_slot(self) -> Path:
        """A fresh ``proposal-N`` folder; numbers already used (a resumed run) are skipped."""
        root = self._root()
        while True:
            slot = root / f"proposal-{next(self._count):04d}"
            if not slot.exists():
                return slot

    def _meter(self) -> Spent:
        return Spent()

    def _cost_known(self, usage: ModelUsage) -> bool:
        return usage.cost_unknown == 0

    async def _write(self, meter: Spent, brief: Brief) -> Written:
        """Run the command on a fresh folder; ``meter`` gets the usage it reported, which a
        refusal (a timeout, a failed exit, a file edited out of bounds) carries too."""
        slot = self._new_slot()
        folder = AgentFolder.write(
            slot / "workspace", brief, cap=self.config.max_prompt_chars, rng=self._rng
        )
        logs = slot / "logs"
        env = agent_environment(
            self.config.env_names,
            {
                "GEPA_PROPOSAL_DIR": str(folder.path),
                "GEPA_TASK_FILE": "TASK.md",
                "GEPA_COMPONENT_FILES": " ".join(folder.editable_paths()),
                **({"GEPA_NOTES_FILE": NOTES_FILE} if brief.notes else {}),
                "GEPA_PROPOSAL_LOGS": str(logs),
                "TMPDIR": str(logs),
            },
        )
        try:
            result = await run_command(
                self.config.command,
                cwd=folder.path,
                env=env,
                timeout_s=self.config.timeout_s,
                logs=logs,
            )
        except ProposalRejected:  # timed out: it spent what it spent, unreported
            meter.usage = read_usage(folder.path, logs / "stdout.txt")
            raise
        usage = read_usage(folder.path, result.stdout)
        if result.returncode != 0:
            meter.usage = usage
            raise ProposalRejected(
                "command_failed",
                f"the proposer command exited with status {result.returncode}: "
                f"{self._masked(result.stderr_tail())}",
            )
        meter.usage = usage  # a refusal of read_back carries it too
        components = folder.read_back()
        rationale = self._masked(_rationale(folder.path))[:_RATIONALE_CHARS]
        return Written(components, rationale, "command")

    def _masked(self, text: str) -> str:
        """``text`` with the values of the variables the agent was given replaced by ``***``:
        the rationale lands in the run's records, evidence and report."""
        for name in self.config.env_names:
            value = os.environ.get(name, "")
            if len(value) >= _MIN_SECRET_CHARS:
                text = text.replace(value, "***")
        return text


def _rationale(path: Path) -> str:
    note = path / "rationale.md"
    if note.is_file() and not note.is_symlink():
        text = note.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            return text[: _RATIONALE_CHARS * 4]  # cut after masking, so no half key survives
    return "written by the proposer command (it wrote no rationale.md)"


def proposer_for(cfg: RunConfig, *, work_dir: Path | None) -> Proposer | ExternalProposer:
    """The run's proposer: the external command when one is given, else the built-in one."""
    rng = random.Random(cfg.seed + 104729)
    if cfg.proposer_command:
        return ExternalProposer(ExternalConfig.from_run_config(cfg, work_dir=work_dir), rng=rng)
    return Proposer(ProposerConfig.from_run_config(cfg), rng=rng)


def command_secrets(cfg: RunConfig) -> list[str]:
    """Values of the variables the command may see: registered with the scrubber, so that an
    agent echoing one into its rationale or error never gets it stored."""
    return [os.environ[n] for n in cfg.proposer_env if os.environ.get(n)]
