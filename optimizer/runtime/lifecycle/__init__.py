"""A run's life: created or resumed, executed phase by phase, guarded, finished.

- :mod:`optimizer.runtime.lifecycle.runner`: create a run or resume one by id, and execute it;
- :mod:`optimizer.runtime.lifecycle.run`: one execution, its phases from baseline to evidence;
- :mod:`optimizer.runtime.lifecycle.run_config` and :mod:`~optimizer.runtime.lifecycle.run_inputs`:
  the config a run executes and the inputs it copies;
- :mod:`optimizer.runtime.lifecycle.lease` and :mod:`~optimizer.runtime.lifecycle.guard`: one
  process at a time, and how a run that did not complete is recorded;
- :mod:`optimizer.runtime.lifecycle.program_check`: the container's program, checked again;
- :mod:`optimizer.runtime.lifecycle.embedded`: a ``--module`` target served in-process;
- :mod:`optimizer.runtime.lifecycle.branch`: a new run whose baseline is another run's candidate;
- :mod:`optimizer.runtime.lifecycle.holdouts`: holdout evaluations in the background;
- :mod:`optimizer.runtime.lifecycle.progress`: the progress bar of the CLI.
"""

from __future__ import annotations

from optimizer.runtime.lifecycle.branch import (
    branch_baseline,
    branch_config,
    branched_program,
    branches_of,
    create_branch,
    find_candidate,
)
from optimizer.runtime.lifecycle.embedded import EmbeddedContainer, container_for, module_spec
from optimizer.runtime.lifecycle.guard import RunGuard
from optimizer.runtime.lifecycle.holdouts import BackgroundHoldouts
from optimizer.runtime.lifecycle.lease import HeldLease, hold_lease
from optimizer.runtime.lifecycle.program_check import ProgramWatch, check_resumed, check_splits
from optimizer.runtime.lifecycle.progress import ProgressBar
from optimizer.runtime.lifecycle.run import PROGRAM_CHECK_S, Run, RunResult
from optimizer.runtime.lifecycle.run_config import (
    DEFAULT_AUTO,
    MODULE_FIELDS,
    absolute_paths,
    budget_warning,
    executed_config,
    know_secrets,
    metric_call_limit,
    new_config,
    plan_event,
    resumed_config,
    serving_config,
    stored_config,
)
from optimizer.runtime.lifecycle.run_inputs import (
    WORKSPACE_REF,
    create_with_inputs,
    is_workspace_ref,
    resolve_inputs,
)
from optimizer.runtime.lifecycle.runner import Runner

__all__ = [
    "BackgroundHoldouts",
    "DEFAULT_AUTO",
    "EmbeddedContainer",
    "HeldLease",
    "MODULE_FIELDS",
    "PROGRAM_CHECK_S",
    "ProgramWatch",
    "ProgressBar",
    "Run",
    "RunGuard",
    "RunResult",
    "Runner",
    "WORKSPACE_REF",
    "absolute_paths",
    "branch_baseline",
    "branch_config",
    "branched_program",
    "branches_of",
    "budget_warning",
    "check_resumed",
    "check_splits",
    "container_for",
    "create_branch",
    "create_with_inputs",
    "executed_config",
    "find_candidate",
    "hold_lease",
    "is_workspace_ref",
    "know_secrets",
    "metric_call_limit",
    "module_spec",
    "new_config",
    "plan_event",
    "resolve_inputs",
    "resumed_config",
    "serving_config",
    "stored_config",
]
