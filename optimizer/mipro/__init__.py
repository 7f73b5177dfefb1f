"""MIPRO on the runtime: instructions and few-shot demo sets searched by a seeded TPE.

It shares GEPA's container client, rollout queue, cache, budget, workspace, heldout
promotion and evidence packet; only the search strategy differs (``MiproSearch``).
"""

from __future__ import annotations

from optimizer.mipro.demos import (
    TaskInfo,
    bootstrap_demos,
    build_demo_sets,
    labelled_demos,
    task_info,
)
from optimizer.mipro.sampler import TrialSampler, load_optuna
from optimizer.mipro.search import InstructionSource, MiproSearch
from optimizer.mipro.surface import Surface, surface_for

__all__ = [
    "InstructionSource",
    "MiproSearch",
    "Surface",
    "TaskInfo",
    "TrialSampler",
    "bootstrap_demos",
    "build_demo_sets",
    "labelled_demos",
    "load_optuna",
    "surface_for",
    "task_info",
]
