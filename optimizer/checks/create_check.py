"""``optimize create`` checks a run as ``dry-run`` does before it stores it.

A run that ``dry-run`` would fail (no target, an unreadable dataset, splits that overlap, a
container that is down, a reflection key that is not set, no budget) is not stored: the user hears
it at ``create``, not when the runner starts somewhere else. A small budget is not a problem:
``create``, ``dry-run`` and ``run`` all accept any budget of 1 or more, and all three say what a
budget below a full run skips (:func:`optimizer.runtime.accounts.plan.plan_run`). The findings go to
stderr, so stdout keeps the run id on its first line for scripts.

The check's sample rollouts are sent as the run will send them (its id, the baseline's
candidate id, with traces); once the run is stored they go into the workspace's rollout cache
(``store_samples``), so ``run`` reads them as cache hits instead of paying for them again.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Sequence

from optimizer.checks.preflight import preflight_for_run, render_findings
from optimizer.runtime.lifecycle.run_config import know_secrets
from schemas import RolloutRecord, RunConfig
from workspace import Workspace

__all__ = ["check_before_create", "planned_run_id", "store_samples"]


def planned_run_id(given: str | None) -> str:
    """The id the new run will have: the one given, else a fresh ``run-<10 hex>``."""
    return given or f"run-{secrets.token_hex(5)}"


def check_before_create(
    config: RunConfig, sample_rollouts: int, run_id: str | None
) -> list[RolloutRecord] | None:
    """Run dry-run's checks on ``config``, print them; ``None`` when one failed, else the
    sample rollouts that scored (for ``store_samples`` once run ``run_id`` exists; none
    without a ``run_id``: a run created on a service keeps no sample)."""
    kept = "kept for the run" if run_id else "not stored"
    sent = f"{sample_rollouts} baseline rollout(s), {kept}" if sample_rollouts else "no rollout"
    print(f"checking the run as dry-run does ({sent}; the reflection model is not called)",
          file=sys.stderr)  # fmt: skip
    findings, samples = asyncio.run(
        preflight_for_run(config, run_id, sample_rollouts=sample_rollouts)
    )
    print(render_findings(findings), file=sys.stderr)
    if all(f.ok for f in findings):
        return samples
    print(
        "nothing stored: fix the problems above, or pass --no-check to store the run as it is",
        file=sys.stderr,
    )
    return None


async def store_samples(
    workspace: Workspace, config: RunConfig, samples: Sequence[RolloutRecord]
) -> None:
    """Put the check's scored sample rollouts in the rollout cache the run reads (its secrets
    masked as in any stored rollout)."""
    if samples:
        know_secrets(workspace, config)
        await workspace.record_rollouts(samples)
