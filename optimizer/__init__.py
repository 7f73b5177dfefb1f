"""The optimizer runtime: run lifecycle, rollout queue, budget, GEPA and MIPRO searches.

Python API: ``run_gepa(...)`` and ``run_mipro(...)`` (see :mod:`optimizer.api`), in the
keyword style or the prompt-optimization spec's (``initial_template``, ``GEPAConfig``,
``Endpoint``, ``score_fn``; see :mod:`optimizer.spec_api`), or ``run_optimization(config)``
with one ``RunConfig`` (see :mod:`optimizer.run`).
"""

from __future__ import annotations

from optimizer.api import run_gepa, run_mipro
from optimizer.api_result import GenerationStats, Member, OptimizationResult
from optimizer.run import RunResult, run_optimization
from optimizer.spec_agent import Environment, Trajectory
from optimizer.spec_api import evaluate_template
from optimizer.spec_config import Endpoint, GEPAConfig, MIPROConfig
from optimizer.spec_rows import Sample, format_prompt
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
    "Trajectory",
    "evaluate_template",
    "format_prompt",
    "run_gepa",
    "run_mipro",
    "run_optimization",
]
