"""The Python API: ``run_gepa`` / ``run_mipro`` in the keyword style or the spec's, and results.

A notebook's target is served in-process as a task container; the run is the CLI's run.
"""

from __future__ import annotations

from optimizer.api.optimize import run_gepa, run_mipro
from optimizer.api.result import GenerationStats, Member, OptimizationResult, build_result
from optimizer.api.spec import (
    Endpoint,
    Environment,
    GEPAConfig,
    Message,
    MIPROConfig,
    Sample,
    ScoreFn,
    Trajectory,
    evaluate_template,
    format_prompt,
)

__all__ = [
    "Endpoint",
    "Environment",
    "GEPAConfig",
    "GenerationStats",
    "MIPROConfig",
    "Member",
    "Message",
    "OptimizationResult",
    "Sample",
    "ScoreFn",
    "Trajectory",
    "build_result",
    "evaluate_template",
    "format_prompt",
    "run_gepa",
    "run_mipro",
]
