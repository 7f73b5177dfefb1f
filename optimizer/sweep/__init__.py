"""A sweep over student models: one optimization per model on one container, compared.

``run_sweep(config, ["m1", "m2"], target_score=0.8)`` (also ``optimize run --student-models``,
``POST /api/sweeps`` and the console's ``/sweeps/<id>``) runs the config once per student
model and writes ``<workspace>/sweeps/<id>/comparison.json`` and ``comparison.md``: the
baseline and best holdout scores with intervals, cost per rollout, latency, the cheapest
model meeting the target, and models the container does not tell apart.
"""

from __future__ import annotations

from optimizer.sweep.compare import Comparison, ModelRow, render_markdown, render_table
from optimizer.sweep.run import SweepResult, gather, parse_models, run_sweep, sweep_dir

__all__ = [
    "Comparison",
    "ModelRow",
    "SweepResult",
    "gather",
    "parse_models",
    "render_markdown",
    "render_table",
    "run_sweep",
    "sweep_dir",
]
