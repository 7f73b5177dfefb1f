"""What a run concludes: the winner, the lift and its evidence.

- :mod:`optimizer.runtime.results.promotion`: heldout selection and the promotion verdict;
- :mod:`optimizer.runtime.results.stats`: the paired bootstrap (pure);
- :mod:`optimizer.runtime.results.evidence`: ``evidence.json`` and ``report.md``;
- :mod:`optimizer.runtime.results.report`: the packet rendered for people (pure).
"""

from __future__ import annotations

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

__all__ = [
    "EvidenceInputs",
    "PairedLift",
    "Promotion",
    "build_evidence",
    "choose_on_train",
    "could_still_win",
    "paired_bootstrap",
    "promotion_summary",
    "prompt_diff",
    "render_report",
    "select_and_promote",
    "selection_need",
    "write_evidence",
]
