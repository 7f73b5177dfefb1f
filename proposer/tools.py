"""The agent's workspace: a read-only view of the run and one draft candidate it may edit.

Tools read the parent's components, its failures and traces, the frontier and other
candidates, and edit the draft. Only the target components of the draft can change: there
are no files and no shell. Every tool returns text; bad arguments (invalid JSON, an unknown
tool or component, an ``old`` passage not found exactly once) return an ``error: ...``
text for the model to correct, never an exception.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from proposer.brief import Brief, evidence_for
from proposer.guards import length_cap
from proposer.render import CHARS_PER_TOKEN, render_trace, truncate
from proposer.types import ProposerConfig
from schemas.records import content_hash

__all__ = ["TOOL_SPECS", "Workspace"]


def _tool(tool_name: str, description: str, /, **params: str) -> dict[str, Any]:
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    return {
        "type": "function",
        "function": {
            "name": tool_name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }


TOOL_SPECS: tuple[dict[str, Any], ...] = (
    _tool(
        "read_components",
        "Show every component of the draft with its kind, purpose and current text.",
    ),
    _tool(
        "list_failures",
        "Show the failing rollouts (input, output, verifier feedback, reward) and a few successes.",
    ),
    _tool(
        "read_trace", "Show the full trace of one rollout (truncated if long).", seed="the seed id"
    ),
    _tool(
        "list_frontier", "List the candidates on the Pareto frontier with the seeds each one wins."
    ),
    _tool(
        "read_candidate", "Show the components of another candidate.", candidate_id="candidate id"
    ),
    _tool("diff", "Show how a candidate differs from its parent.", candidate_id="candidate id"),
    _tool(
        "edit_component",
        "Replace one passage of a component of the draft. `old` must occur exactly once.",
        name="component name",
        old="exact text to replace",
        new="replacement text",
    ),
    _tool(
        "rewrite_component",
        "Replace the whole text of a component of the draft.",
        name="component name",
        text="the complete new text",
    ),
    _tool(
        "submit",
        "Finish: submit the draft as the new candidate.",
        rationale="what you changed and why, in 1-3 sentences",
    ),
)


class Workspace:
    """The state of one agent proposal: the draft and whether it was submitted."""

    def __init__(self, brief: Brief, config: ProposerConfig, rng: random.Random) -> None:
        self.brief = brief
        self.draft: dict[str, str] = dict(brief.base)
        self.rationale: str | None = None
        self._config = config
        self._rng = rng
        self._failures: str | None = None
        self._warned: set[str] = set()
        self._tools: dict[str, Callable[..., str]] = {
            "read_components": self.read_components,
            "list_failures": self.list_failures,
            "read_trace": self.read_trace,
            "list_frontier": self.list_frontier,
            "read_candidate": self.read_candidate,
            "diff": self.diff,
            "edit_component": self.edit_component,
            "rewrite_component": self.rewrite_component,
            "submit": self.submit,
        }

    def call(self, name: str, arguments: str) -> str:
        """Run one tool call from raw JSON arguments; errors come back as text."""
        tool = self._tools.get(name)
        if tool is None:
            return f"error: unknown tool {name!r}; available tools: {', '.join(self._tools)}"
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return (
                f"error: the arguments of {name} are not valid JSON ({exc.msg}); send a JSON object"
            )
        if not isinstance(args, dict):
            return f"error: the arguments of {name} must be a JSON object"
        spec = next(s["function"] for s in TOOL_SPECS if s["function"]["name"] == name)
        expected = spec["parameters"]["properties"]
        missing = [k for k in spec["parameters"]["required"] if not isinstance(args.get(k), str)]
        if missing:
            return f"error: {name} needs string argument(s) {', '.join(missing)}"
        return tool(**{k: v for k, v in args.items() if k in expected})

    def read_components(self) -> str:
        """Every component of the draft, editable ones marked."""
        blocks = []
        for spec in self.brief.specs:
            text = self.draft.get(spec.name, "")
            state = "editable" if spec.name in self.brief.targets else "read-only"
            if text != self.brief.base.get(spec.name):
                state += ", edited"
            blocks.append(
                f"## {spec.name} (kind: {spec.kind}; {state}; {len(text):,} chars)\n"
                f"{spec.description}\n```\n{text}\n```"
            )
        return "\n\n".join(blocks)

    def list_failures(self) -> str:
        """The rollouts under half the evidence budget (the same sample on every call)."""
        if self._failures is None:
            budget = max(500, self._config.evidence_token_budget // 2)
            self._failures = evidence_for(self.brief, budget_tokens=budget, rng=self._rng)
        return self._failures

    def read_trace(self, seed: str) -> str:
        """One rollout's trace; in a merge the seed may be prefixed ``A:`` or ``B:``."""
        label, _, bare = seed.rpartition(":")
        known = (*self.brief.evaluations, *(("", e) for e in self.brief.context))
        for tag, evaluation in known:
            if evaluation.seed == seed or (evaluation.seed == bare and tag == label.strip()):
                limit = self._config.evidence_token_budget * CHARS_PER_TOKEN // 3
                return f"trace of {seed} (reward {evaluation.reward}):\n" + render_trace(
                    evaluation, limit
                )
        seeds = ", ".join(f"{t}:{e.seed}" if t else e.seed for t, e in known)
        return f"error: no rollout for seed {seed!r}; known seeds: {seeds}"

    def list_frontier(self) -> str:
        """Frontier candidates with their wins and mean score."""
        if not self.brief.frontier:
            return "the frontier has no other candidates yet"
        lines = []
        for view in self.brief.frontier:
            mean = sum(view.scores.values()) / len(view.scores) if view.scores else float("nan")
            mark = " (parent)" if view.candidate_id in self.brief.parent_ids else ""
            lines.append(
                f"- {view.candidate_id}{mark}: parents {list(view.parents)}, mean score {mean:.3f}, "
                f"wins {len(view.wins)} seeds: {', '.join(view.wins[:20])}"
            )
        return "\n".join(lines)

    def read_candidate(self, candidate_id: str) -> str:
        """The components of a parent or frontier candidate."""
        view = self.brief.candidate(candidate_id)
        if view is None:
            return f"error: unknown candidate {candidate_id!r}; use list_frontier"
        limit = self._config.max_prompt_chars * 2
        return "\n\n".join(
            f"## {name}\n```\n{truncate(text, limit, 'component')}\n```"
            for name, text in view.components.items()
        )

    def diff(self, candidate_id: str) -> str:
        """How a candidate differs from its parent."""
        view = self.brief.candidate(candidate_id)
        if view is None:
            return f"error: unknown candidate {candidate_id!r}; use list_frontier"
        return (
            truncate(view.diff_from_parent, 4000, "diff")
            or f"{candidate_id} has no recorded diff (a seed candidate?)"
        )

    def _editable(self, name: str) -> str | None:
        if name in self.brief.targets:
            return None
        kind = "read-only in this proposal" if name in self.draft else "unknown"
        return (
            f"error: component {name!r} is {kind}; you can change: {', '.join(self.brief.targets)}"
        )

    def edit_component(self, name: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` in component ``name``."""
        if error := self._editable(name):
            return error
        if not old:
            return "error: `old` is empty; quote the passage to replace, or use rewrite_component"
        count = self.draft[name].count(old)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            return f"error: `old` was {where} in {name}; quote a passage that occurs exactly once"
        self.draft[name] = self.draft[name].replace(old, new, 1)
        return self._saved(name)

    def rewrite_component(self, name: str, text: str) -> str:
        """Replace the whole text of component ``name``."""
        if error := self._editable(name):
            return error
        self.draft[name] = text
        return self._saved(name)

    def _saved(self, name: str) -> str:
        limit = length_cap(self._config.max_prompt_chars, self.brief.base.get(name, ""))
        size = len(self.draft[name])
        warning = f" WARNING: over the cap of {limit:,} chars, shorten it" if size > limit else ""
        return f"ok: {name} now has {size:,} chars (cap {limit:,}).{warning}"

    def submit(self, rationale: str) -> str:
        """Submit the draft. A fixable problem is reported once; a second submit goes through."""
        problem = self._problem()
        if problem and problem not in self._warned:
            self._warned.add(problem)
            return f"error: {problem}. Fix it and call submit again."
        self.rationale = rationale.strip() or "(no rationale given)"
        return "submitted"

    def _problem(self) -> str | None:
        if any(self.draft == dict(p.components) for p in self.brief.parents):
            return "the draft is identical to a parent: edit a component first"
        for name in self.brief.targets:
            limit = length_cap(self._config.max_prompt_chars, self.brief.base.get(name, ""))
            if len(self.draft[name]) > limit:
                return f"{name} has {len(self.draft[name]):,} chars, over the cap of {limit:,}"
        if content_hash(self.draft) in self.brief.existing_hashes:
            return "the draft is identical to an existing candidate: change something"
        return None
