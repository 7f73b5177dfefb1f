"""``optimize create`` checks a run as ``dry-run`` does before it stores it.

A run that ``dry-run`` would fail (no target, an unreadable dataset, splits that overlap, a
container that is down, a reflection key that is not set, no budget) is not stored: the user
hears it at ``create``, not when the runner starts somewhere else. A small budget is not a
problem: ``create``, ``dry-run`` and ``run`` all accept any budget of 1 or more, and all
three say what a budget below a full run skips (:func:`optimizer.runtime.plan.plan_run`). The
findings go to stderr, so stdout keeps the run id on its first line for scripts.
"""

from __future__ import annotations

import asyncio
import sys

from optimizer.checks.preflight import preflight, render_findings
from schemas import RunConfig

__all__ = ["check_before_create"]


def check_before_create(config: RunConfig, sample_rollouts: int) -> bool:
    """Run dry-run's checks on ``config``; print them; whether every check passed."""
    sent = f"{sample_rollouts} baseline rollout(s), not stored" if sample_rollouts else "no rollout"
    print(f"checking the run as dry-run does ({sent}; the reflection model is not called)",
          file=sys.stderr)  # fmt: skip
    findings = asyncio.run(preflight(config, sample_rollouts=sample_rollouts))
    print(render_findings(findings), file=sys.stderr)
    if all(f.ok for f in findings):
        return True
    print(
        "nothing stored: fix the problems above, or pass --no-check to store the run as it is",
        file=sys.stderr,
    )
    return False
