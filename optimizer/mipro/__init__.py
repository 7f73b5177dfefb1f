"""MIPRO: instructions and few-shot demo sets searched by a seeded TPE, on the runtime.

A :class:`MiproMethod` plugs it in; the queue, cache, budget, promotion and evidence packet are
the runtime's, and MIPRO adds its own part to the packet and the report
(:mod:`optimizer.mipro.evidence`).
"""

from __future__ import annotations

from optimizer.mipro.demos import (
    TaskInfo,
    bootstrap_demos,
    build_demo_sets,
    labelled_demos,
    task_info,
)
from optimizer.mipro.method import MiproMethod
from optimizer.mipro.sampler import TrialSampler, load_optuna
from optimizer.mipro.search import InstructionSource, MiproSearch
from optimizer.mipro.surface import Surface, surface_for

__all__ = [
    "InstructionSource",
    "MiproMethod",
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
