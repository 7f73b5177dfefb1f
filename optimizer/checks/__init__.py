"""Checks before a run spends budget: ``optimize dry-run`` and the checks of ``optimize create``.

Each problem is a ``Finding`` that names what is wrong and the fix; nothing is stored.

The modules: ``preflight`` (the checks, ``preflight``), ``create_check`` (``optimize
create``'s, ``check_before_create``), ``sample_rollouts`` (the baseline sent on a few seeds)
and ``findings`` (``Finding``, ``render_findings``). The package itself imports none of them,
so ``optimize run``, which needs no check, does not load them (nor the container SDK they use).
"""

from __future__ import annotations
