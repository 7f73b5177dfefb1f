"""MIPRO's part of the evidence packet (``"mipro"``) and of ``report.md``.

The section holds the search space (instructions, demo sets, how the demo pool was made),
every trial, and which (instruction, demo set) the winner is; the report shows them as tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optimizer.runtime.search.state import SearchState

__all__ = ["evidence_section", "report_lines"]


def evidence_section(state: SearchState, best_id: str) -> dict[str, Any] | None:
    """MIPRO's search space and trials; which (instruction, demo set) the best is. ``None``
    when the search kept nothing (a budget too small to search)."""
    mipro = state.extra.get("mipro")
    if mipro is None:
        return None
    trials = list(mipro.get("trials", []))
    chosen = next((t for t in trials if t["candidate_id"] == best_id), None)
    return {
        "instructions": mipro.get("instructions", []),
        "demo_sets": mipro.get("demo_sets", []),
        "setup": mipro.get("setup", {}),
        "trials": trials,
        "best_params": (
            {"instruction": chosen["instruction"], "demo_set": chosen["demo_set"]}
            if chosen
            else None
        ),
    }


def report_lines(section: Mapping[str, Any]) -> list[str]:
    """The section as Markdown: the demo pool, the instructions, the demo sets, the trials."""
    setup = section.get("setup", {})
    out = [
        "",
        "## MIPRO search",
        "",
        f"Demo pool: {setup.get('bootstrapped', 0)} bootstrapped (verified correct) + "
        f"{setup.get('labelled', 0)} labelled train examples. Best parameters: "
        f"{section.get('best_params') or 'n/a'}.",
        "",
        "| # | instruction (start) |",
        "|---|---|",
    ]
    for i, text in enumerate(section.get("instructions", [])):
        out.append(f"| {i} | {text[:120].replace(chr(10), ' ').replace('|', '/')} |")
    out += ["", "| demo set | demos |", "|---|---|"]
    out += [f"| {i} | {len(demos)} |" for i, demos in enumerate(section.get("demo_sets", []))]
    out += [
        "",
        "| trial | instruction | demo set | minibatch score | paid |",
        "|---|---|---|---|---|",
    ]
    for t in section.get("trials", []):
        score = "n/a" if t["score"] is None else f"{t['score']:.3f}"
        out.append(
            f"| {t['trial']} | {t['instruction']} | {t['demo_set']} | {score} | {t['paid']} |"
        )
    return out
