"""Wire protocol (``gepa-container/1``), run config, stored records and the exception tree.

See :mod:`schemas.protocol` for the protocol itself.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.config import AUTO_LEVELS, BranchOf, ModelPrice, RunConfig
from schemas.exceptions import (
    ActionRefused,
    BudgetExhausted,
    ContainerError,
    ContainerUnavailable,
    GepaError,
    InvalidRollout,
    PromptTooLong,
    ProposalRejected,
    ProposerError,
    ProtocolViolation,
    Retryable,
    RolloutFailed,
    RunLeased,
    StoreUnreachable,
    UserError,
    WorkspaceError,
)
from schemas.protocol import (
    COMPONENT_KINDS,
    DEFAULT_REWARD_RANGE,
    PROTOCOL,
    WIRE_MODELS,
    Component,
    ComponentKind,
    Direction,
    ErrorBody,
    ErrorDetail,
    Health,
    Objective,
    Policy,
    Program,
    RolloutRequest,
    RolloutResponse,
    Seeds,
    Trace,
    Usage,
    parse_rollout,
)
from schemas.records import (
    PHASES,
    CandidateRecord,
    Event,
    Origin,
    Phase,
    RolloutRecord,
    RunRecord,
    RunStatus,
    Trial,
    TrialView,
    cache_key,
    candidate_id_for,
    content_hash,
    policy_key,
)
from schemas.scoring import Metric, Score
from schemas.select import SelectRule, parse_select
from schemas.steering import ACTIONS, Action
from schemas.template import (
    DEMOS_COMPONENT,
    SYSTEM_COMPONENT,
    Demo,
    FewShotExample,
    PromptTemplate,
    TemplateError,
    demos_from_text,
    demos_to_text,
    render_messages,
    task_fields,
)
from schemas.usage import ModelUsage

__all__ = [
    "ACTIONS",
    "AUTO_LEVELS",
    "BranchOf",
    "DEMOS_COMPONENT",
    "SYSTEM_COMPONENT",
    "Demo",
    "FewShotExample",
    "Metric",
    "PromptTemplate",
    "Score",
    "TemplateError",
    "demos_from_text",
    "demos_to_text",
    "render_messages",
    "task_fields",
    "COMPONENT_KINDS",
    "DEFAULT_REWARD_RANGE",
    "PHASES",
    "PROTOCOL",
    "WIRE_MODELS",
    "Action",
    "ActionRefused",
    "BudgetExhausted",
    "CandidateRecord",
    "Component",
    "ComponentKind",
    "ContainerError",
    "ContainerUnavailable",
    "Direction",
    "ErrorBody",
    "ErrorDetail",
    "Event",
    "GepaError",
    "Health",
    "InvalidRollout",
    "ModelPrice",
    "ModelUsage",
    "Objective",
    "Origin",
    "Phase",
    "Policy",
    "Program",
    "PromptTooLong",
    "ProposalRejected",
    "ProposerError",
    "ProtocolViolation",
    "Retryable",
    "RolloutFailed",
    "RolloutRecord",
    "RolloutRequest",
    "RolloutResponse",
    "RunConfig",
    "RunLeased",
    "RunRecord",
    "RunStatus",
    "SelectRule",
    "Seeds",
    "Trace",
    "Trial",
    "TrialView",
    "Usage",
    "UserError",
    "StoreUnreachable",
    "WorkspaceError",
    "cache_key",
    "candidate_id_for",
    "content_hash",
    "json_schemas",
    "parse_rollout",
    "parse_select",
    "policy_key",
]


def json_schemas() -> dict[str, Any]:
    """The JSON Schema of every wire model, keyed by model name."""
    return {name: model.model_json_schema() for name, model in WIRE_MODELS.items()}


def json_schemas_text() -> str:
    """``json_schemas()`` as indented JSON text (what ``gepa-runtime schema`` prints)."""
    return json.dumps(json_schemas(), indent=2, sort_keys=True)
