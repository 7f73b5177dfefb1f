"""Checks before a run spends budget: ``optimize dry-run`` and the checks of ``optimize create``.

Each problem is a ``Finding`` that names what is wrong and the fix; nothing is stored.
"""

from __future__ import annotations

from optimizer.checks.create_check import check_before_create
from optimizer.checks.findings import Finding, render_findings
from optimizer.checks.preflight import SAMPLE_ROLLOUTS, preflight

__all__ = ["SAMPLE_ROLLOUTS", "Finding", "check_before_create", "preflight", "render_findings"]
