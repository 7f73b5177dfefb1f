"""A duration a process takes from its caller or its environment, checked: the lease timeout,
the store's outage limit."""

from __future__ import annotations

import os
from collections.abc import Mapping

from schemas import UserError

__all__ = ["seconds_setting"]


def seconds_setting(
    given: float | None,
    env: Mapping[str, str] | None,
    *,
    variable: str,
    field: str,
    default: float,
    meaning: str,
) -> float:
    """``given``, else ``$variable``, else ``default``, in seconds; outside 1 s to a day is
    a ``UserError`` that says what the setting is (``meaning``)."""
    environ = os.environ if env is None else env
    raw = environ.get(variable) if given is None else str(given)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 86400.0:
        raise UserError(
            f"{variable} / {field} {raw!r}: give {meaning}, from 1 to 86400 (default {default:g})"
        )
    return value
