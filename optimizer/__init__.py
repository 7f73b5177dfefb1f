"""gepa-runtime's optimizer, in layers: ``runtime`` <- ``gepa``, ``mipro`` (searches) <- ``api``, ``cli``, ``service``.

Python API: ``run_gepa(...)`` and ``run_mipro(...)`` (see :mod:`optimizer.api.optimize`), in the
keyword style or the prompt-optimization spec's (``initial_template``, ``GEPAConfig``,
``Endpoint``, ``score_fn``; see :mod:`optimizer.api.spec`), or ``run_optimization(config)``
with one ``RunConfig`` (see :mod:`optimizer.searches`), or ``run_sweep(config,
student_models)`` for one run per student model and their comparison (see :mod:`optimizer.sweep`). The layout: ``docs/architecture.md``.

Every ``gepa-runtime`` command runs this file first (it is ``optimizer.cli``'s package), so
the names below are loaded on first use: the Python API brings the container SDK, starlette
and uvicorn, which a command that serves nothing in process does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from schemas import FewShotExample, Metric, PromptTemplate, Score

if TYPE_CHECKING:
    from optimizer.api import (
        Endpoint,
        Environment,
        GenerationStats,
        GEPAConfig,
        Member,
        Message,
        MIPROConfig,
        OptimizationResult,
        Sample,
        ScoreFn,
        Trajectory,
        evaluate_template,
        format_prompt,
        run_gepa,
        run_mipro,
    )
    from optimizer.runtime.lifecycle.run import RunResult
    from optimizer.searches import run_optimization
    from optimizer.sweep import SweepResult, run_sweep

__all__ = [
    "Endpoint",
    "Environment",
    "FewShotExample",
    "GEPAConfig",
    "GenerationStats",
    "MIPROConfig",
    "Member",
    "Message",
    "Metric",
    "OptimizationResult",
    "PromptTemplate",
    "RunResult",
    "Sample",
    "Score",
    "ScoreFn",
    "SweepResult",
    "Trajectory",
    "evaluate_template",
    "format_prompt",
    "run_gepa",
    "run_mipro",
    "run_optimization",
    "run_sweep",
]

_HOMES = {
    "RunResult": "optimizer.runtime.lifecycle.run",
    "run_optimization": "optimizer.searches",
    "SweepResult": "optimizer.sweep",
    "run_sweep": "optimizer.sweep",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (see the module docstring)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES.get(name, "optimizer.api")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
