"""A fresh PostgreSQL schema per test or bench run, on a server the caller names.

The store's URL carries ``options=-csearch_path=<schema>``, so the store creates its tables
there, and the schema is dropped afterwards. psycopg (the ``[postgres]`` extra) is imported
on first use.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

__all__ = ["fresh_schema", "with_options"]


def with_options(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` (libpq's ``options`` parameter)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A new empty schema for one test; yields the URL that uses it, drops it afterwards."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    try:
        yield with_options(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]
