"""A run's accounts: what it may pay, what that affords, and what happened.

The ground floor of the runtime; every other room reads or writes these:

- :mod:`optimizer.runtime.accounts.budget`: paid metric calls and dollars against their
  limits, and the ``--auto`` formula;
- :mod:`optimizer.runtime.accounts.plan`: what a budget affords (pure): the seeds a run uses,
  whether it searches, what it skips;
- :mod:`optimizer.runtime.accounts.events`: the event sink, appended to the workspace log and
  fanned out to listeners.
"""

from __future__ import annotations

from optimizer.runtime.accounts.budget import (
    AUTO_PROPOSALS,
    Budget,
    auto_metric_calls,
    resolve_metric_calls,
)
from optimizer.runtime.accounts.events import EventSink, Listener
from optimizer.runtime.accounts.plan import (
    LARGE_AUTO_BUDGET,
    MIN_HOLDOUT,
    RunPlan,
    auto_budget_warning,
    default_proposals_in_flight,
    holdout_overlap,
    plan_run,
    search_minimum,
)

__all__ = [
    "AUTO_PROPOSALS",
    "Budget",
    "EventSink",
    "LARGE_AUTO_BUDGET",
    "Listener",
    "MIN_HOLDOUT",
    "RunPlan",
    "auto_budget_warning",
    "auto_metric_calls",
    "default_proposals_in_flight",
    "holdout_overlap",
    "plan_run",
    "resolve_metric_calls",
    "search_minimum",
]
