"""An in-process rule container and a scripted proposer for search tests (no model, no socket).

The container speaks the protocol through ``httpx.MockTransport``: each seed has a label, and
a rollout is correct when the candidate's prompt has the line ``- <label>`` (its feedback
says ``expected <label>``). The proposer adds the first missing label of the failures it is
shown as one line; a test can hold a proposal back until the search reached some state, which
makes interleavings of parallel proposals deterministic.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from proposer import MergeRequest, Proposal, ProposalRequest
from proposer.guards import unified_diff
from schemas import ModelUsage, ProposalRejected, content_hash

BASELINE = "Answer with the label."
FEEDBACK = re.compile(r"expected (\w+)")


# The run settings of the search tests against the rule container (``http://rules``).
SEARCH_SETTINGS: dict[str, Any] = {
    "containers": ["http://rules"],
    "reflection_model": "scripted",
    "max_metric_calls": 400,
    "minibatch_size": 2,
    "max_idle_iterations": 3,
    "use_merge": False,
}


def program(
    labels: Iterable[str], *, train: int = 2, holdout: int = 2, val: int = 0
) -> dict[str, Any]:
    """``GET /program`` for seeds ``<label>-<i>`` split per label into train, val, holdout."""
    seeds: dict[str, list[str]] = {"train": [], "val": [], "holdout": []}
    for label in labels:
        names = [f"{label}-{i}" for i in range(train + val + holdout)]
        seeds["train"] += names[:train]
        seeds["val"] += names[train : train + val]
        seeds["holdout"] += names[train + val :]
    return {
        "program_id": "rules",
        "fingerprint": "fp-rules-1",
        "description": "Answer the label of the item; the prompt must list the labels.",
        "components": [{"name": "system_prompt", "kind": "prompt", "text": BASELINE}],
        "seeds": seeds,
    }


@dataclass
class RuleContainer:
    """The container as an ``httpx.MockTransport`` handler; counts rollouts per (prompt, seed)."""

    program: dict[str, Any]
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Look-alike labels: with both lines and no ``- <a>_<b>`` line telling them apart, the
    # items of the one listed first get the other's label (feedback: ``expected <a>_<b>``).
    rivals: dict[str, str] = field(default_factory=dict)
    # A line that makes the student fail every item (an edit that only hurts).
    poison: str | None = None
    # When the student errs though the prompt has the rule: (prompt, seed) -> True (a noisy
    # student, made deterministic for a test).
    slips: Callable[[str, str], bool] = lambda prompt, seed: False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/health":
            return httpx.Response(200, json={"status": "ok", "protocol": "gepa-container/1"})
        if path == "/program":
            return httpx.Response(200, json=self.program)
        body = json.loads(request.content)
        prompt, seed = body["candidate"]["system_prompt"], body["seed"]
        self.calls[(content_hash(body["candidate"]), seed)] += 1
        label = seed.rsplit("-", 1)[0]
        known = {line[2:].strip() for line in prompt.splitlines() if line.startswith("- ")}
        ok = label in known and self.poison not in known and not self.slips(prompt, seed)
        rival = self.rivals.get(label)
        pair = "_".join(sorted((label, rival or "")))
        if ok and rival in known and pair not in known:
            lines = prompt.splitlines()
            if lines.index(f"- {rival}") > lines.index(f"- {label}"):
                return httpx.Response(
                    200,
                    json={
                        "reward": 0.0,
                        "output": rival,
                        "feedback": f"predicted {rival}, expected {pair}",
                        "trace": {"messages": [{"role": "user", "content": f"item {seed}"}]},
                    },
                )
        return httpx.Response(
            200,
            json={
                "reward": 1.0 if ok else 0.0,
                "output": label if ok else "unknown",
                "feedback": "correct" if ok else f"predicted unknown, expected {label}",
                "trace": {"messages": [{"role": "user", "content": f"item {seed}"}]},
            },
        )

    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` that reaches this container for ``http://rules``."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


@dataclass
class ScriptedProposer:
    """Adds one line per proposal: the first label in the failures it is shown.

    ``hold(n)`` returns an event the n-th proposal (1-based) waits for before answering.
    ``seen`` keeps every request, for tests of what the proposer was shown.
    """

    seen: list[ProposalRequest] = field(default_factory=list)
    merges: list[MergeRequest] = field(default_factory=list)
    holds: dict[int, asyncio.Event] = field(default_factory=dict)
    total_usage: ModelUsage = field(default_factory=ModelUsage)
    pick: Callable[[list[str], int], str] = lambda labels, n: labels[0]
    # Each proposal also rewrites the first line, so two edits of one parent conflict.
    conflicting: bool = False
    # Each proposal also words the first line anew, so two edits of one parent change the
    # same sentence two ways (a three-way merge of them conflicts).
    rewording: bool = False
    # Fix a failure shown only among the other train failures, not in the minibatch.
    from_context: bool = False
    # Always add this line, whatever the failures (a proposal that fixes nothing).
    fixed_label: str | None = None
    # These proposals (1-based) drop the parent's last label line and add nothing: answers
    # that make the text worse, as real reflection models sometimes write.
    drops: frozenset[int] = frozenset()
    # A line those answers add in place of the one they drop (a rewrite that lost a rule).
    drop_adds: str | None = None
    # The n-th answer's text, or None for an unchanged text (overrides the rules above).
    script: Callable[[ProposalRequest, int], str | None] | None = None

    def hold(self, n: int) -> asyncio.Event:
        """The event the n-th proposal waits for."""
        return self.holds.setdefault(n, asyncio.Event())

    async def aclose(self) -> None:
        """Nothing to release."""

    async def propose(self, request: ProposalRequest) -> Proposal:
        self.seen.append(request)
        n = len(self.seen)
        if n in self.holds:
            await self.holds[n].wait()
        self.total_usage = self.total_usage + ModelUsage(calls=1)
        if self.script is not None:
            scripted = self.script(request, n)
            if scripted is None:
                raise ProposalRejected("unchanged", "nothing to fix")
            return self._answer(request, {"system_prompt": scripted})
        text = request.parent.components["system_prompt"]
        known = {line[2:].strip() for line in text.splitlines() if line.startswith("- ")}
        if n in self.drops:
            lines = text.splitlines()
            last = max(i for i, line in enumerate(lines) if line.startswith("- "))
            added = [self.drop_adds] if self.drop_adds else []
            return self._answer(
                request, {"system_prompt": "\n".join(lines[:last] + lines[last + 1 :] + added)}
            )
        shown = request.evaluations
        if self.from_context:
            in_minibatch = {m.group(1) for e in shown if (m := FEEDBACK.search(e.feedback))}
            shown = tuple(
                e
                for e in request.train_evaluations
                if (m := FEEDBACK.search(e.feedback)) and m.group(1) not in in_minibatch
            )
        failing = [
            m.group(1)
            for e in shown
            if (m := FEEDBACK.search(e.feedback)) and m.group(1) not in known
        ]
        if not failing and self.fixed_label is None:
            raise ProposalRejected("unchanged", "nothing to fix")
        label = self.fixed_label or self.pick(sorted(set(failing)), n)
        if self.conflicting:
            head, *rest = text.splitlines()
            text = "\n".join([f"{BASELINE} (version {n})", *rest])
        if self.rewording:
            head, *rest = text.splitlines()
            text = "\n".join([f"Give the item's label, version {n}.", *rest])
        return self._answer(request, {"system_prompt": f"{text}\n- {label}"})

    def _answer(self, request: ProposalRequest, new: dict[str, str]) -> Proposal:
        if content_hash(new) in request.existing_hashes:
            raise ProposalRejected("duplicate", "exists", content_hash=content_hash(new))
        diff = unified_diff(request.parent.components, new, request.parent.candidate_id)
        return Proposal(
            components=new,
            rationale="add a missed label",
            usage=ModelUsage(calls=1),
            diff=diff,
            mode="text",
            parents=(request.parent.candidate_id,),
        )

    async def merge(self, request: MergeRequest) -> Proposal:
        """A's first line and every label line of A and B."""
        self.merges.append(request)
        self.total_usage = self.total_usage + ModelUsage(calls=1)
        a, b = (v.components["system_prompt"].splitlines() for v in (request.a, request.b))
        lines = list(dict.fromkeys([*a, *(line for line in b if line.startswith("- "))]))
        new = {"system_prompt": "\n".join(lines)}
        if content_hash(new) in request.existing_hashes:
            raise ProposalRejected("duplicate", "exists")
        return Proposal(
            components=new,
            rationale="union of the labels",
            usage=ModelUsage(calls=1),
            diff=unified_diff(request.a.components, new, request.a.candidate_id),
            mode="text",
            parents=(request.a.candidate_id, request.b.candidate_id),
        )
