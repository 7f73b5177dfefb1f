"""The optimizer runtime: run lifecycle, rollout queue, budget, GEPA and MIPRO searches.

Python API: ``run_gepa(...)`` and ``run_mipro(...)`` (see :mod:`optimizer.api`), or
``run_optimization(config)`` with one ``RunConfig`` (see :mod:`optimizer.run`).
"""

from __future__ import annotations

from optimizer.api import Member, OptimizeResult, run_gepa, run_mipro
from optimizer.run import RunResult, run_optimization

__all__ = ["Member", "OptimizeResult", "RunResult", "run_gepa", "run_mipro", "run_optimization"]
