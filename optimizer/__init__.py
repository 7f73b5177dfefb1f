"""gepa-runtime's optimizer, in layers: ``runtime`` <- ``gepa``, ``mipro`` (searches) <- ``api``, ``cli``, ``service``.

Python API: ``run_gepa(...)`` and ``run_mipro(...)`` (see :mod:`optimizer.api.optimize`), in the
keyword style or the prompt-optimization spec's (``initial_template``, ``GEPAConfig``,
``Endpoint``, ``score_fn``; see :mod:`optimizer.api.spec`), or ``run_optimization(config)``
with one ``RunConfig`` (see :mod:`optimizer.searches`), or ``run_sweep(config,
student_models)`` for one run per student model and their comparison (see :mod:`optimizer.sweep`). The layout: ``docs/architecture.md``.
"""

from __future__ import annotations

from optimizer.api import (
    Endpoint,
    Environment,
    GenerationStats,
    GEPAConfig,
    Member,
    MIPROConfig,
    OptimizationResult,
    Sample,
    Trajectory,
    evaluate_template,
    format_prompt,
    run_gepa,
    run_mipro,
)
from optimizer.runtime.run import RunResult
from optimizer.searches import run_optimization
from optimizer.sweep import SweepResult, run_sweep
from schemas import FewShotExample, Metric, PromptTemplate, Score

__all__ = [
    "Endpoint",
    "Environment",
    "FewShotExample",
    "GEPAConfig",
    "GenerationStats",
    "MIPROConfig",
    "Member",
    "Metric",
    "OptimizationResult",
    "PromptTemplate",
    "RunResult",
    "Sample",
    "Score",
    "SweepResult",
    "Trajectory",
    "evaluate_template",
    "format_prompt",
    "run_gepa",
    "run_mipro",
    "run_optimization",
    "run_sweep",
]
