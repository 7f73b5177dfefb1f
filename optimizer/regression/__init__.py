"""The regression gate (``gepa-runtime check``): a prompt against a reference, with the
promotion's statistics.

A candidate (a prompt file, a JSON of components, a registry version or a candidate id) is
scored against a reference (the baseline, a run's best, another file) on the same seeds of
one split of the container, through the rollout cache, and judged by the paired lift and its
95% bootstrap interval (:mod:`optimizer.regression.verdict`): it passes unless it is worse than the
reference by more than a margin. ``--run RUN_ID`` checks a finished run's best against the
container as it is now, on the seeds its lift was measured on.

    result = await run_check(CheckSpec(source=RunConfig(containers=[url]),
                                       candidate="prompts/system.txt"), workspace)
    print(check_markdown(result))
"""

from __future__ import annotations

from optimizer.regression.report import CHECK_FORMAT, check_json, check_markdown, check_summary
from optimizer.regression.runner import run_check
from optimizer.regression.sources import Side
from optimizer.regression.spec import CheckResult, CheckSpec
from optimizer.regression.verdict import Verdict, judge

__all__ = [
    "CHECK_FORMAT",
    "CheckResult",
    "CheckSpec",
    "Side",
    "Verdict",
    "check_json",
    "check_markdown",
    "check_summary",
    "judge",
    "run_check",
]
