"""Turns a parent candidate (or two, for a merge) plus its failures into new candidates.

The reflection model is reached over OpenAI-compatible chat completions. In agent mode it
works through tools on a draft of the candidate; in text mode (models without tool calls)
it answers one request with the new text in delimited blocks; ``"auto"`` picks agent mode
and falls back to text mode for endpoints that do not call tools. Every proposal passes
guards (not cut off, not empty, changed, new, under the length cap) or raises
``ProposalRejected``; its usage is accounted either way.

    proposer = Proposer(ProposerConfig.from_run_config(cfg), rng=random.Random(cfg.seed))
    proposal = await proposer.propose(ProposalRequest(...))

``ExternalProposer`` (``--proposer-command``) hands each proposal to an external coding agent
instead: a folder of files in, edited component files out, under the same guards. Both are
``BaseProposer``s (:mod:`proposer.base`): one propose/merge path, one usage account.
"""

from __future__ import annotations

from proposer.base import BaseProposer
from proposer.client import (
    ChatReply,
    Endpoint,
    ModelClient,
    ToolCall,
    ToolsUnsupported,
    resolve_endpoint,
)
from proposer.external import ExternalConfig, ExternalProposer
from proposer.instructions import InstructionRequest, InstructionSet, TaskExample
from proposer.proposer import Proposer
from proposer.types import (
    CandidateView,
    ComponentSpec,
    Evaluation,
    MergeRequest,
    PersonNote,
    Proposal,
    ProposalRequest,
    ProposerConfig,
)
from transport.pricing import PRICES, Price, price_for

__all__ = [
    "PRICES",
    "BaseProposer",
    "CandidateView",
    "ChatReply",
    "ComponentSpec",
    "Endpoint",
    "Evaluation",
    "ExternalConfig",
    "ExternalProposer",
    "InstructionRequest",
    "InstructionSet",
    "MergeRequest",
    "ModelClient",
    "PersonNote",
    "Price",
    "Proposal",
    "ProposalRequest",
    "Proposer",
    "ProposerConfig",
    "TaskExample",
    "ToolCall",
    "ToolsUnsupported",
    "price_for",
    "resolve_endpoint",
]
