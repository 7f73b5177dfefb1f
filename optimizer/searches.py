"""The built-in search methods by name, and the runtime's entry points with them plugged in.

The runtime (:mod:`optimizer.runtime`) knows no method: it is handed this registry. A new
method is a package with a ``SearchMethod`` (see :mod:`optimizer.runtime.search.strategy`) and one
line in :data:`SEARCHES`; ``RunConfig.method`` names it.

``run_optimization`` (the public ``optimizer.run_optimization``) and ``run_stored`` are
:class:`optimizer.runtime.lifecycle.runner.Runner`'s, bound to :data:`SEARCHES`.
"""

from __future__ import annotations

from types import MappingProxyType

from optimizer.gepa.method import GepaMethod
from optimizer.mipro.method import MiproMethod
from optimizer.runtime.lifecycle.runner import Runner
from optimizer.runtime.search.strategy import Searches

__all__ = ["RUNNER", "SEARCHES", "run_optimization", "run_stored"]

SEARCHES: Searches = MappingProxyType({"gepa": GepaMethod(), "mipro": MiproMethod()})
RUNNER = Runner(SEARCHES)

run_optimization = RUNNER.run_optimization
run_stored = RUNNER.run_stored
