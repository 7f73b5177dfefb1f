"""The values the optimizer hands to the proposer and gets back (frozen dataclasses).

The optimizer builds a ``ProposalRequest`` (one parent, its minibatch rollouts, the frontier,
the notes a person wrote for it) or a ``MergeRequest`` (two candidates with complementary
wins) and receives a ``Proposal``:
the full component mapping of the new candidate, the model's rationale, the unified diff
against the parent(s) and the usage the proposal cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.config import ModelPrice, RunConfig
from schemas.exceptions import UserError
from schemas.usage import ModelUsage
from transport.routing import ENDPOINT_KINDS

__all__ = [
    "MODES",
    "CandidateView",
    "ComponentSpec",
    "Evaluation",
    "MergeRequest",
    "PersonNote",
    "Proposal",
    "ProposalRequest",
    "ProposerConfig",
]

MODES = ("auto", "agent", "text", "rule")


@dataclass(frozen=True)
class ComponentSpec:
    """One mutable component of the program: its name, kind and what it is for."""

    name: str
    kind: str
    description: str = ""


@dataclass(frozen=True)
class Evaluation:
    """One rollout of a candidate on a seed, as the proposer reads it.

    ``trace`` follows the wire ``Trace`` (``messages``, ``tool_calls``, ``events``); the
    task input is read from its ``user`` messages when present. ``status`` is ``"ok"`` for a
    scored rollout and anything else for one that errored (``reward`` is then ``None``).
    """

    seed: str
    reward: float | None
    output: Any
    feedback: str
    trace: Mapping[str, Any]
    status: str = "ok"


@dataclass(frozen=True)
class CandidateView:
    """A candidate as the proposer sees it: components, lineage and per-seed standing."""

    candidate_id: str
    components: Mapping[str, str]
    parents: tuple[str, ...] = ()
    scores: Mapping[str, float] = field(default_factory=dict)  # per train seed
    wins: tuple[str, ...] = ()  # train seeds where it is on the Pareto frontier
    diff_from_parent: str = ""


@dataclass(frozen=True)
class PersonNote:
    """A note from the person running the optimization, shown to the reflection model as
    their feedback; ``candidate_id`` is the candidate whose lineage it is about, if any."""

    text: str
    candidate_id: str | None = None


@dataclass(frozen=True)
class ProposalRequest:
    """Ask for one mutation of ``parent`` from its minibatch rollouts."""

    program_description: str
    components: tuple[ComponentSpec, ...]
    parent: CandidateView
    evaluations: tuple[Evaluation, ...]  # parent's minibatch rollouts (failures and successes)
    frontier: tuple[CandidateView, ...] = ()
    target_components: tuple[str, ...] = ()  # empty = all components
    existing_hashes: frozenset[str] = frozenset()
    # The parent's other train rollouts, already paid for (its full train evaluation): more
    # failures to learn from at no rollout cost. Shown after the minibatch, more briefly.
    train_evaluations: tuple[Evaluation, ...] = ()
    notes: tuple[PersonNote, ...] = ()  # a person's feedback, shown in every mode


@dataclass(frozen=True)
class MergeRequest:
    """Ask for one candidate that keeps what ``a`` and ``b`` each do well."""

    program_description: str
    components: tuple[ComponentSpec, ...]
    a: CandidateView
    b: CandidateView
    evaluations_a: tuple[Evaluation, ...] = ()
    evaluations_b: tuple[Evaluation, ...] = ()
    existing_hashes: frozenset[str] = frozenset()
    notes: tuple[PersonNote, ...] = ()  # a person's feedback, shown in every mode


@dataclass(frozen=True)
class Proposal:
    """A new candidate that passed every guard.

    ``components`` maps every component name to its text (untouched ones included).
    ``diff`` is the unified diff against the parent(s), one string; ``diffs`` is the same
    split by parent id (what ``CandidateRecord.diffs`` stores). ``mode`` is ``"agent"``, ``"rule"`` or
    ``"text"``; ``cost_known`` is false when the price table does not know the model.
    """

    components: Mapping[str, str]
    rationale: str
    usage: ModelUsage
    diff: str
    mode: str
    parents: tuple[str, ...]
    diffs: Mapping[str, str] = field(default_factory=dict)
    cost_known: bool = True


@dataclass(frozen=True)
class ProposerConfig:
    """How to reach the reflection model and the bounds every proposal stays within.

    ``model`` may carry a provider prefix (``openrouter/``: OpenRouter with
    ``OPENROUTER_API_KEY``; ``openai/``: OpenAI or ``base_url``; see :mod:`transport.routing`). The API key is read from the environment variable named by
    ``api_key_env`` when the client is built and is never stored here.
    """

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    max_steps: int = 8
    max_tokens: int = 2048
    max_total_tokens: int = 60000
    max_prompt_chars: int = 6000
    evidence_token_budget: int = 6000
    timeout_s: float = 180.0
    max_retries: int = 3
    temperature: float = 0.7
    seed: int | None = None  # sent to endpoints that support sampling seeds (OpenAI, llama.cpp)
    # "local", "hosted" or "auto" (by base_url): a local model's echo is asked for once more.
    endpoint: str = "auto"
    # The user's prices over the built-in table (transport.pricing), by model name.
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.model:
            raise UserError(
                "proposer model is empty: set --reflection-model (GEPA_REFLECTION_MODEL)"
            )
        if self.mode not in MODES:
            raise UserError(f"proposer mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.endpoint not in ENDPOINT_KINDS:
            raise UserError(
                f"reflection endpoint {self.endpoint!r} is not one of {', '.join(ENDPOINT_KINDS)}"
            )
        if self.max_steps < 1 or self.max_tokens < 1 or self.max_prompt_chars < 1:
            raise UserError("proposer max_steps, max_tokens and max_prompt_chars must be >= 1")

    @classmethod
    def from_run_config(cls, cfg: RunConfig) -> ProposerConfig:
        """The proposer part of a run config; ``UserError`` when no reflection model is set."""
        if not cfg.reflection_model:
            raise UserError(
                "no reflection model: pass --reflection-model MODEL (or GEPA_REFLECTION_MODEL), "
                "e.g. gpt-4.1-mini or openrouter/anthropic/claude-sonnet-4"
            )
        return cls(
            model=cfg.reflection_model,
            base_url=cfg.reflection_base_url,
            api_key_env=cfg.reflection_api_key_env,
            mode=cfg.proposer_mode,
            max_prompt_chars=cfg.max_prompt_chars,
            max_tokens=cfg.reflection_max_tokens,
            max_retries=cfg.max_retries,
            seed=cfg.seed,
            endpoint=cfg.reflection_endpoint,
            prices=cfg.prices,
        )
