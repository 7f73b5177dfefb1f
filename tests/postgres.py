"""The real PostgreSQL server of the tests.

``GEPA_TEST_POSTGRES_URL`` names the server and a database the user owns; ``.ci/run`` starts
Debian's PostgreSQL on 127.0.0.1 with ``.ci/postgres`` and exports it (run that script by
hand to get the same: ``export GEPA_TEST_POSTGRES_URL=$(bash .ci/postgres)``). Without it,
or without psycopg, the tests that need the server skip saying so, unless
``GEPA_REQUIRE_POSTGRES=1`` (CI), which makes the skip a failure.

Each test gets a schema of its own (:func:`optimizer.testing.postgres.fresh_schema`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NoReturn

import pytest

ENV = "GEPA_TEST_POSTGRES_URL"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``GEPA_REQUIRE_POSTGRES=1``."""
    if os.environ.get("GEPA_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"GEPA_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def server_url() -> str:
    """The test server's URL, checked to answer; else a skip (or a failure in CI)."""
    url = os.environ.get(ENV)
    if not url:
        unavailable(f"{ENV} is not set: start a server with `export {ENV}=$(bash .ci/postgres)`")
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed: pip install -e '.[postgres]'")
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        unavailable(f"the PostgreSQL server of {ENV} does not answer: {exc}")
    return url


def execute(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement (``?`` placeholders) as another client would; its rows."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description is not None else []
