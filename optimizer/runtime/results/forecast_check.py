"""The evidence packet's ``forecast``: what ``optimize plan`` predicted against what the run spent.

A plan of a stored run (``optimize plan RUN_ID``) is kept in the run folder as
``forecast.json``; the packet sets each predicted figure beside the run's own: container
calls (paid rollouts), reflection calls and tokens, student tokens, dollars of both models,
and the wall time of this execution of the run. No plan, no section (``null``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from optimizer.runtime.accounts.budget import Budget
from schemas import ModelUsage, UserError, WorkspaceError
from workspace import Workspace

__all__ = ["FORECAST_FILE", "actual_figures", "forecast_lines", "forecast_section"]

FORECAST_FILE = "forecast.json"
FIGURES = (
    "container_calls",
    "reflection_calls",
    "reflection_tokens",
    "student_tokens",
    "student_usd",
    "reflection_usd",
    "total_usd",
    "wall_s",
)


def actual_figures(budget: Budget, proposer: ModelUsage, wall_s: float) -> dict[str, float]:
    """What the run spent, under the forecast's names."""
    return {
        "container_calls": budget.paid,
        "reflection_calls": proposer.calls,
        "reflection_tokens": proposer.input_tokens + proposer.output_tokens,
        "student_tokens": budget.student_input_tokens + budget.student_output_tokens,
        "student_usd": round(budget.student_cost_usd, 6),
        "reflection_usd": round(proposer.cost_usd, 6),
        "total_usd": round(budget.student_cost_usd + proposer.cost_usd, 6),
        "wall_s": round(wall_s, 1),
    }


async def forecast_section(
    workspace: Workspace, run_id: str, actual: Mapping[str, float]
) -> dict[str, Any] | None:
    """The plan kept with the run beside what it spent, or ``None`` when it was not planned."""
    try:
        plan = json.loads(await workspace.read_file(run_id, FORECAST_FILE))
    except (UserError, WorkspaceError, OSError, ValueError):  # not planned, or unreadable
        return None
    predicted = plan.get("forecast", {})
    figures = {}
    for name in FIGURES:
        figure = predicted.get(name) or {}
        value, real = figure.get("value"), actual.get(name)
        figures[name] = {
            "predicted": value,
            "actual": real,
            "ratio": round(real / value, 3) if value and real is not None else None,
            "assumption": figure.get("assumption", ""),
        }
    return {
        "made_at": plan.get("made_at"),
        "limited_by": predicted.get("limited_by"),
        "figures": figures,
    }


def forecast_lines(section: Mapping[str, Any] | None) -> list[str]:
    """``report.md``'s table of the plan against the run."""
    if not section:
        return []
    out = [
        "",
        "## Plan against the run",
        "",
        "What `gepa-runtime optimize plan` predicted before the run, and what it spent.",
        "",
        "| figure | planned | spent | spent / planned |",
        "|---|---|---|---|",
    ]
    for name, f in section["figures"].items():
        ratio = "n/a" if f["ratio"] is None else f"{f['ratio']:.2f}"
        out.append(f"| {name} | {_shown(f['predicted'])} | {_shown(f['actual'])} | {ratio} |")
    return out


def _shown(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.4f}" if 0 < abs(value) < 1 else f"{value:,.0f}"
