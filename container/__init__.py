"""The container SDK: turn an agent into a ``gepa-container/1`` task container.

    from container import AgentResult, optimize

    @optimize(id="banking77-intent", kind="prompt", baseline="Classify the intent.")
    async def classify(task, candidate):
        text = await call_model(candidate.text, task.input, model=candidate.model)
        return AgentResult(output=text)

Serve it with ``gepa-runtime container mymodule --dataset data.jsonl`` or build the ASGI app
with ``create_app(target, dataset=...)``. ``baseline=`` may also be a prompt file or a
``prompts:/NAME@ALIAS`` registry URI, which the application reads with ``load_prompt``.

The app (``create_app``, ``served_program``: starlette, OpenTelemetry) is imported on first
use: the optimizer process imports this package for loading targets and datasets and never
serves it unless a run has a ``--module``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from container.chat import ChatTarget
from container.dataset import Dataset, load_dataset
from container.faults import UserMistake
from container.fingerprint import compute_fingerprint
from container.loader import load_target
from container.program import ServedProgram, build_served_program
from container.prompts import load_components, load_prompt
from container.results import AgentResult, Score
from container.splits import Splits, default_splits, load_splits
from container.target import (
    Registry,
    Target,
    clear_optimization_targets,
    default_registry,
    get_optimization_target,
    list_optimization_targets,
    optimize,
)
from container.task import Candidate, Task
from container.verifiers import Verifier, load_verifier, normalize_text
from schemas.exceptions import Retryable

if TYPE_CHECKING:
    from container.app import create_app, served_program

__all__ = [
    "AgentResult",
    "Candidate",
    "ChatTarget",
    "Dataset",
    "Registry",
    "Retryable",
    "Score",
    "ServedProgram",
    "Splits",
    "Target",
    "Task",
    "UserMistake",
    "Verifier",
    "build_served_program",
    "clear_optimization_targets",
    "compute_fingerprint",
    "create_app",
    "default_registry",
    "default_splits",
    "get_optimization_target",
    "list_optimization_targets",
    "load_components",
    "load_dataset",
    "load_prompt",
    "load_splits",
    "load_target",
    "load_verifier",
    "normalize_text",
    "optimize",
    "served_program",
]


def __getattr__(name: str) -> Any:
    """``create_app`` and ``served_program``, imported from ``container.app`` on first use."""
    if name not in ("create_app", "served_program"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("container.app"), name)
    globals()[name] = value
    return value
