"""What ``run.sh`` installs into .venv for the flags it was given: ``.`` and the extras they need.

    python3 examples/banking77/bootstrap.py --seed 7 --method mipro    # prints .[mipro]

``run.sh`` runs this file with the system Python before .venv has the package, so it uses the
standard library only and is run as a script, not imported through ``examples``. The flags are
``main_job.py``'s; the ones it does not know are ignored here and judged there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["EXTRAS", "requirement"]

# (flag, value) -> the extra of pyproject.toml that the job needs when given that flag
EXTRAS: dict[tuple[str, str], str] = {("--method", "mipro"): "mipro"}


def requirement(argv: Sequence[str]) -> str:
    """The pip requirement of this checkout for the job's flags: ``.`` or ``.[extra,...]``."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    for flag in sorted({flag for flag, _ in EXTRAS}):
        parser.add_argument(flag)
    try:
        known, _ = parser.parse_known_args(list(argv))
    except argparse.ArgumentError:
        return "."  # a malformed flag: the job's own parser says what is wrong
    extras = sorted(
        {
            extra
            for (flag, value), extra in EXTRAS.items()
            if getattr(known, flag.lstrip("-").replace("-", "_")) == value
        }
    )
    return f".[{','.join(extras)}]" if extras else "."


if __name__ == "__main__":
    print(requirement(sys.argv[1:]))
