"""``python -m optimizer.cli``: the same command line as the ``gepa-runtime`` script."""

from __future__ import annotations

import sys

from optimizer.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
