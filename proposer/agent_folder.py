"""The folder an external coding agent works in: written from a ``Brief``, read back, checked.

One folder per proposal. The agent edits ``components/<file>.txt`` in place; everything
else is there to be read (``TASK.md``, ``failures.md``, ``traces/``, ``rollouts.json``,
``frontier.md``, for a merge ``merge/B/``, and ``NOTES.md`` when the person running the
optimization left notes for this proposal: ``TASK.md`` quotes them too). Besides the editable component files it may
write only ``rationale.md`` (why the edit) and ``usage.json`` (what it spent). Any other
file created, changed or deleted, a read-only component edited or an editable one
deleted or turned into a link refuses the proposal (``ProposalRejected``, reason
``outside_components``): an agent that writes where it was not asked to has not done the
job it was given, and what it wrote is not what will be evaluated.

    folder = AgentFolder.write(root, brief, cap=6000, rng=rng)
    ...                                  # the command runs in folder.path
    components = folder.read_back()      # ProposalRejected when it stepped outside
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from proposer.brief import Brief, evidence_for
from proposer.prompts import GUIDELINES, frontier_section, notes_section, wins_table
from proposer.render import is_failure, render_trace
from schemas.exceptions import ProposalRejected

__all__ = ["NOTES_FILE", "OUTPUT_FILES", "AgentFolder", "component_files"]

NOTES_FILE = "NOTES.md"  # the person's notes, when there are any
# Files the agent may create besides its component edits (read by proposer.agent_command).
OUTPUT_FILES = ("rationale.md", "usage.json")
EVIDENCE_TOKENS = 20000  # an agent reads files at its own pace: more than a chat prompt holds
TRACE_CHARS = 12000
_SHOWN_PATHS = 5


def component_files(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """A safe, unique file name under ``components/`` for each component name."""
    files: dict[str, str] = {}
    for name in names:
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "component"
        candidate, n = f"{stem}.txt", 2
        while candidate in files.values():
            candidate, n = f"{stem}-{n}.txt", n + 1
        files[name] = candidate
    return files


def _snapshot(root: Path) -> dict[str, str]:
    """Relative path -> content digest (``link:<target>`` for a symlink) of every file."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = f"link:{os.readlink(path)}"
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@dataclass
class AgentFolder:
    """A written proposal folder and what it looked like before the agent ran."""

    path: Path
    brief: Brief
    files: dict[str, str]  # component name -> file name under components/
    before: dict[str, str]

    @classmethod
    def write(cls, path: Path, brief: Brief, *, cap: int, rng: random.Random) -> AgentFolder:
        """Create ``path`` (must not exist) with everything the agent reads."""
        path.mkdir(parents=True)
        files = component_files([s.name for s in brief.specs])
        (path / "components").mkdir()
        for name, file in files.items():
            (path / "components" / file).write_text(brief.base.get(name, ""), encoding="utf-8")
        (path / "failures.md").write_text(
            evidence_for(brief, budget_tokens=EVIDENCE_TOKENS, rng=rng), encoding="utf-8"
        )
        _write_rollouts(path, brief)
        (path / "frontier.md").write_text(_frontier(brief), encoding="utf-8")
        if brief.kind == "merge":
            other = path / "merge" / "B"
            other.mkdir(parents=True)
            for name, file in files.items():
                (other / file).write_text(brief.parents[1].components.get(name, ""), "utf-8")
        if brief.notes:
            (path / NOTES_FILE).write_text(notes_section(brief.notes) + "\n", encoding="utf-8")
        (path / "TASK.md").write_text(task_text(brief, files, cap), encoding="utf-8")
        return cls(path, brief, files, _snapshot(path))

    def editable_paths(self) -> list[str]:
        """Paths (relative to the folder) of the component files the agent may edit."""
        return [f"components/{self.files[name]}" for name in self.brief.targets]

    def read_back(self) -> dict[str, str]:
        """Every component's text after the agent ran; ``ProposalRejected`` when it wrote
        outside the editable component files (or removed one)."""
        after = _snapshot(self.path)
        allowed = set(self.editable_paths())
        problems = []
        for rel in sorted(set(self.before) | set(after)):
            old, new = self.before.get(rel), after.get(rel)
            if old == new or (old is None and rel in OUTPUT_FILES):
                continue
            if rel in allowed and new is not None and not new.startswith("link:"):
                continue
            verb = "created" if old is None else "deleted" if new is None else "changed"
            problems.append(f"{verb} {rel}")
        if problems:
            shown = ", ".join(problems[:_SHOWN_PATHS])
            more = (
                f" (+{len(problems) - _SHOWN_PATHS} more)" if len(problems) > _SHOWN_PATHS else ""
            )
            raise ProposalRejected(
                "outside_components",
                f"the agent {shown}{more}; only {', '.join(sorted(allowed))} may change "
                f"(and {' / '.join(OUTPUT_FILES)} be written)",
            )
        return {name: self._read(name) for name in self.files}

    def _read(self, name: str) -> str:
        file = self.path / "components" / self.files[name]
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ProposalRejected(
                "unreadable", f"components/{self.files[name]} is not UTF-8 text: {exc}"
            ) from exc
        base = self.brief.base.get(name, "")
        # Editors and agents end files with a newline the prompt never had.
        if text != base and not base.endswith("\n"):
            text = text.rstrip("\n")
        return text


def _write_rollouts(path: Path, brief: Brief) -> None:
    """``rollouts.json`` (every rollout shown, as data) and one readable trace per failure."""
    rows = []
    traces = path / "traces"
    traces.mkdir()
    for label, e in brief.evaluations:
        rows.append(
            {
                "candidate": label or None,
                "seed": e.seed,
                "status": e.status,
                "reward": e.reward,
                "output": e.output,
                "feedback": e.feedback,
                "trace": dict(e.trace),
            }
        )
        if is_failure(e):
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{label}{'-' if label else ''}{e.seed}")
            (traces / f"{stem}.txt").write_text(render_trace(e, TRACE_CHARS), encoding="utf-8")
    text = json.dumps(rows, ensure_ascii=False, indent=1, default=str)
    (path / "rollouts.json").write_text(text, encoding="utf-8")


def _frontier(brief: Brief) -> str:
    if brief.kind == "merge":
        a, b = brief.parents
        return (
            f"# Candidates to merge\n\nA = {a.candidate_id} (in components/), "
            f"B = {b.candidate_id} (in merge/B/)\n\nPer-seed scores where either wins:\n\n"
            + wins_table(a, b)
            + "\n"
        )
    parent = brief.parents[0]
    head = (
        f"# Frontier\n\nThe version in components/ is {parent.candidate_id}; it is best on "
        f"{len(parent.wins)} train seeds.\n\n"
    )
    return head + (frontier_section(brief.frontier, parent.candidate_id) or "(no other candidates)")


def task_text(brief: Brief, files: Mapping[str, str], cap: int) -> str:
    """``TASK.md``: the job, what may change and what not, where the evidence is."""
    editable: list[str] = []
    readonly: list[str] = []
    for spec in brief.specs:
        line = f"- `components/{files[spec.name]}`: component `{spec.name}` ({spec.kind})"
        line += f": {spec.description}" if spec.description else ""
        (editable if spec.name in brief.targets else readonly).append(line)
    if brief.kind == "merge":
        job = (
            "Two versions of this program's text win on different cases. `components/` holds "
            "version A, `merge/B/` version B. Write into `components/` one version that keeps "
            "what each does well (see `frontier.md` and `failures.md`)."
        )
    else:
        job = (
            "The student (an LLM program) runs with the texts in `components/`. It failed the "
            "cases in `failures.md`. Edit the texts so that it stops making these mistakes, on "
            "these cases and on unseen ones like them."
        )
    parts = [
        "# Task: improve the instructions of an LLM program",
        f"Program: {brief.program_description or '(no description)'}",
        job,
        "## What you may change\n"
        + "\n".join(editable)
        + f"\n\nEdit these files in place; each must stay at most {cap:,} characters (or its "
        "current length, if longer). Write the complete new text, not a diff.",
        "## What you must not touch\n"
        + ("\n".join(readonly) + "\n" if readonly else "")
        + "- every other file here: do not create, change, rename or delete any file except "
        "the ones above. A proposal that does is refused. You may also write `rationale.md` "
        "(one short paragraph: the mistake pattern your edit fixes) and `usage.json` (below).",
        "## What to read\n"
        "- `failures.md`: failures (input, student output, verifier feedback) and a few "
        "successes to keep\n"
        "- `traces/`: the full trace of each failure\n"
        "- `rollouts.json`: the same rollouts as data\n"
        "- `frontier.md`: the other candidates and where they win"
        + (
            f"\n- `{NOTES_FILE}`: the notes above, from the person running this optimization"
            if brief.notes
            else ""
        ),
        notes_section(brief.notes, heading="##"),
        "## How to write the new text\n" + GUIDELINES,
        "## Reporting what you spent (optional)\n"
        'Write `usage.json` as `{"input_tokens": N, "output_tokens": N, "cost_usd": X}` '
        "(any of them), or print it as the last line of your output. Unreported usage is "
        "recorded as unknown.",
    ]
    return "\n\n".join(part for part in parts if part) + "\n"
