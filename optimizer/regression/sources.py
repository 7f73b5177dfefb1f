"""What a check compares: each side named on the command line, resolved to a candidate's texts.

A side is named as one of:

- ``baseline``: the run's baseline with ``--run``, else the baseline the container serves now;
- ``best``: the best candidate of ``--run`` (its evidence packet's);
- a prompt file (``.txt``/``.md``/... for a one-component program, ``.json``/``.yaml`` for
  several: :mod:`schemas.prompt_file`) or an inline JSON object of component name -> text;
- a registry URI, ``prompts:/NAME@ALIAS`` or ``prompts:/NAME/VERSION``;
- a candidate id (16 hex digits): of ``--run``, else of any run of the workspace.

Every side must give each of the program's components a text, and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from container import load_components
from schemas import CandidateRecord, Program, RunRecord, UserError, candidate_id_for
from schemas.prompt_file import (
    components_from_json,
    is_registry_uri,
    read_prompt_file,
)
from workspace import Workspace

__all__ = ["FORMS", "RunContext", "Side", "load_run", "resolve_side"]

FORMS = (
    "`baseline`, `best` (with --run), a prompt file (.txt, .md, .json, .yaml), inline JSON "
    "of components, prompts:/NAME@ALIAS, or a candidate id"
)
_CANDIDATE_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class Side:
    """One side of the comparison: what the user named, and the texts it resolved to."""

    named: str  # as given on the command line
    what: str  # how the report describes it
    components: dict[str, str]

    @property
    def candidate_id(self) -> str:
        """The candidate's stable id (its content hash's start), as runs name it."""
        return candidate_id_for(self.components)


@dataclass(frozen=True)
class RunContext:
    """A finished (or not) run of the workspace: its record, evidence and candidates."""

    record: RunRecord
    packet: dict[str, Any] | None
    candidates: Mapping[str, CandidateRecord] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.record.run_id

    def baseline(self) -> dict[str, str]:
        """The texts the run started from."""
        if self.packet is not None:
            return dict(self.packet["baseline"]["components"])
        seeds = [c for c in self.candidates.values() if c.origin == "seed"]
        if not seeds:
            raise UserError(f"run {self.run_id} has no baseline yet: run it first")
        return dict(seeds[0].components)

    def best(self) -> dict[str, str]:
        """The run's winner, from its evidence packet."""
        if self.packet is None:
            raise UserError(
                f"run {self.run_id} has no evidence packet yet, so no best: finish it with "
                f"`gepa-runtime optimize run {self.run_id}`, or name a candidate id of it"
            )
        return dict(self.packet["best"]["components"])

    def promotion(self) -> dict[str, Any] | None:
        """The run's verdict (lift, interval, seeds), once it has one."""
        return None if self.packet is None else dict(self.packet["promotion"])

    def measured_seeds(self, split: str) -> list[str] | None:
        """The ``split`` seeds where the promotion paired best and baseline (both scored), in
        the program's order; ``None`` when the run did not measure its lift on ``split``."""
        promo = self.promotion()
        per_seed = (self.packet or {}).get("per_seed", {}).get(split)
        if promo is None or promo.get("measured_on", "holdout") != split or per_seed is None:
            return None
        return [
            s for s, v in per_seed.items() if v["best"] is not None and v["baseline"] is not None
        ]


async def load_run(ws: Workspace, run_id: str) -> RunContext:
    """The run ``run_id`` of the workspace (``UserError`` when there is none)."""
    record = await ws.get_run(run_id)
    packet = None
    if "evidence.json" in await ws.list_files(run_id):
        packet = json.loads(await ws.read_file(run_id, "evidence.json"))
    candidates = {c.candidate_id: c for c in await ws.list_candidates(run_id)}
    return RunContext(record, packet, candidates)


async def resolve_side(
    named: str, *, program: Program, run: RunContext | None, ws: Workspace
) -> Side:
    """The texts ``named`` stands for, checked against the program's components."""
    components, what = await _components(named, program, run, ws)
    _match(named, components, program)
    return Side(named=named, what=what, components=components)


async def _components(
    named: str, program: Program, run: RunContext | None, ws: Workspace
) -> tuple[dict[str, str], str]:
    text = named.strip()
    only = program.components[0].name if len(program.components) == 1 else None
    if text == "baseline":
        if run is not None:
            return run.baseline(), f"the baseline of run {run.run_id}"
        return program.baseline(), "the baseline the container serves"
    if text == "best":
        if run is None:
            raise UserError("`best` is the best candidate of a run: pass --run RUN_ID")
        return run.best(), f"the best candidate of run {run.run_id}"
    if is_registry_uri(text):
        components = await asyncio.to_thread(load_components, text, component=only or "")
        return components, f"{text} (prompt registry)"
    if text.startswith("{"):
        return components_from_json(text, "the inline JSON"), "inline JSON"
    path = Path(text)
    if path.is_file():
        return read_prompt_file(path, component=only or ""), f"`{text}`"
    if _CANDIDATE_ID.match(text):
        return await _candidate(text, run, ws)
    raise UserError(f"{text!r} is no file, candidate id or side a check knows: name {FORMS}")


async def _candidate(
    candidate_id: str, run: RunContext | None, ws: Workspace
) -> tuple[dict[str, str], str]:
    """A candidate's texts by id: in ``run``, else in the first run of the workspace that has it."""
    if run is not None:
        if candidate_id in run.candidates:
            return dict(run.candidates[candidate_id].components), f"candidate {candidate_id}"
        raise UserError(
            f"run {run.run_id} has no candidate {candidate_id}: `gepa-runtime runs show "
            f"{run.run_id}` lists them"
        )
    for record in await ws.list_runs():
        for candidate in await ws.list_candidates(record.run_id):
            if candidate.candidate_id == candidate_id:
                return dict(
                    candidate.components
                ), f"candidate {candidate_id} of run {record.run_id}"
    raise UserError(
        f"no run of the workspace {ws.location} has a candidate {candidate_id}: pass "
        "--workspace, or name the candidate by a prompt file"
    )


def _match(named: str, components: Mapping[str, str], program: Program) -> None:
    """``UserError`` unless ``components`` names exactly the program's components."""
    served = [c.name for c in program.components]
    if "" in components and len(served) > 1:
        raise UserError(
            f"{named!r} holds one text, but program {program.program_id!r} has {len(served)} "
            f"components ({', '.join(served)}): give a .json or .yaml file that names each"
        )
    missing = [n for n in served if n not in components]
    extra = [n for n in components if n not in served]
    if missing or extra:
        said = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra)}" if extra else "",
            )
            if part
        )
        raise UserError(
            f"{named!r} does not match program {program.program_id!r}, whose components are "
            f"{', '.join(served)}: {said}"
        )
