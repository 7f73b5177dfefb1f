"""Keep the service token out of the logs.

A browser cannot send headers on a page load or an ``EventSource``, so the console passes
the token as ``?token=...``, and uvicorn's access log prints every path with its query.
:class:`QueryTokenFilter` rewrites the value to ``***`` in each record before any handler
formats it; :func:`scrub_access_log` installs it on uvicorn's access logger.
"""

from __future__ import annotations

import logging
import re

__all__ = ["QueryTokenFilter", "scrub_access_log", "scrub_query_token"]

_TOKEN = re.compile(r"([?&]token=)[^&#\s\"']*", re.IGNORECASE)


def scrub_query_token(text: str) -> str:
    """``text`` with the value of every ``token=`` query parameter replaced by ``***``."""
    return _TOKEN.sub(r"\1***", text)


class QueryTokenFilter(logging.Filter):
    """Rewrites ``?token=`` values in a record's message and arguments; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = scrub_query_token(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                scrub_query_token(a) if isinstance(a, str) else a for a in record.args
            )
        return True


def scrub_access_log(logger: logging.Logger | None = None) -> None:
    """Install the filter on ``logger`` (uvicorn's access logger by default), once."""
    target = logger or logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QueryTokenFilter) for f in target.filters):
        target.addFilter(QueryTokenFilter())
