"""What a run concludes: the winner, the lift and its evidence.

- :mod:`optimizer.runtime.results.promotion`: heldout selection and the promotion verdict;
- :mod:`optimizer.runtime.results.stats`: the paired bootstrap (pure);
- :mod:`optimizer.runtime.results.evidence`: ``evidence.json`` and ``report.md``;
- :mod:`optimizer.runtime.results.report`: the packet rendered for people (pure);
- :mod:`optimizer.runtime.results.why`: why each candidate was kept or dropped, from the events;
- :mod:`optimizer.runtime.results.compare`: two candidates side by side, from stored rollouts.
"""

from __future__ import annotations

from optimizer.runtime.results.compare import compare, compare_lines, component_diffs
from optimizer.runtime.results.evidence import (
    EvidenceInputs,
    build_evidence,
    prompt_diff,
    write_evidence,
)
from optimizer.runtime.results.promotion import (
    Promotion,
    choose_on_train,
    could_still_win,
    select_and_promote,
    selection_need,
)
from optimizer.runtime.results.report import promotion_summary, render_report
from optimizer.runtime.results.stats import PairedLift, paired_bootstrap
from optimizer.runtime.results.why import explain, read_events, why_lines, why_table

__all__ = [
    "EvidenceInputs",
    "PairedLift",
    "Promotion",
    "build_evidence",
    "choose_on_train",
    "compare",
    "compare_lines",
    "component_diffs",
    "could_still_win",
    "explain",
    "paired_bootstrap",
    "promotion_summary",
    "prompt_diff",
    "read_events",
    "render_report",
    "select_and_promote",
    "selection_need",
    "why_lines",
    "why_table",
    "write_evidence",
]
