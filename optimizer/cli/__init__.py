"""The ``gepa-runtime`` command line: one module per command group, dispatched by ``main``.

``python -m optimizer.cli`` and the console script (``optimizer.cli:main``) both land here.
"""

from __future__ import annotations

from optimizer.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
