"""The PostgreSQL store: where ``--workspace`` points, migrations, and errors that name the fix.

The contract both engines keep is the rest of this folder (the ``store`` fixture); these are
what only the PostgreSQL store has: a URL to parse, a server to reach, a schema shared by
processes that open it at once. Every refusal leaves what is stored as it was.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from schemas import RunConfig, UserError, WorkspaceError
from tests.postgres import execute
from workspace import DatabaseURL, Workspace, mask_url, resolve_workspace
from workspace.postgres import PG_SCHEMA_VERSION

CONFIG = RunConfig(containers=["http://127.0.0.1:9"])
ROOT = Path(__file__).resolve().parents[2]


def _with(url: str, **parts: str) -> str:
    """``url`` with its password, port or database replaced."""
    split = urlsplit(url)
    user, password = split.username or "", split.password or ""
    host, port = split.hostname or "", str(split.port or "")
    password = parts.get("password", password)
    port = parts.get("port", port)
    path = f"/{parts['dbname']}" if "dbname" in parts else split.path
    return urlunsplit(split._replace(netloc=f"{user}:{password}@{host}:{port}", path=path))


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_postgres_url_is_a_store_and_never_a_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "postgresql://gepa:s3cret@db.internal:5432/gepa"
    target = resolve_workspace(url, {})
    assert (
        target == DatabaseURL(url) and str(target) == "postgresql://gepa:***@db.internal:5432/gepa"
    )
    assert resolve_workspace(None, {"GEPA_WORKSPACE": "postgres://u@h/d"}) == DatabaseURL(
        "postgres://u@h/d"
    )
    ws = Workspace(url)
    assert (ws.backend, ws.location) == ("postgres", "postgresql://gepa:***@db.internal:5432/gepa")
    assert ws.root == Path(".gepa")  # the local run-files folder
    assert list(tmp_path.iterdir()) == []  # no folder named "postgresql:"


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("mysql://u:pw@h/d", "the scheme 'mysql' is not a workspace"),
        ("postgresql+psycopg://u@h/d", "drop the driver suffix: postgresql://u@h/d"),
        ("sqlite:///tmp/x.db", "give a folder (SQLite"),
    ],
)
def test_other_url_schemes_are_refused_naming_what_is_accepted(value: str, hint: str) -> None:
    with pytest.raises(UserError, match="postgresql://USER@HOST:PORT/DBNAME") as info:
        resolve_workspace(value, {})
    assert hint in str(info.value) and "pw" not in str(info.value)


def test_mask_url_hides_only_the_password() -> None:
    assert mask_url("postgresql://a:b%40c@h:1/d?x=1") == "postgresql://a:***@h:1/d?x=1"
    assert mask_url("postgresql://a@h/d") == "postgresql://a@h/d"


async def _refused(url: str) -> str:
    with pytest.raises(WorkspaceError) as info:
        async with Workspace(url):
            pass
    message = str(info.value)
    password = urlsplit(url).password
    assert not password or password not in message  # never printed
    return message


async def test_a_wrong_password_names_the_fix(postgres_url: str) -> None:
    message = await _refused(_with(postgres_url, password="not-the-password"))
    assert "refused the login of user 'gepa'" in message
    assert "fix the password in --workspace / GEPA_WORKSPACE" in message
    assert "PGPASSWORD" in message


async def test_a_missing_database_names_the_fix(postgres_url: str) -> None:
    message = await _refused(_with(postgres_url, dbname="no_such_db"))
    assert "has no database 'no_such_db'" in message
    assert "createdb -h 127.0.0.1" in message and "CREATE DATABASE" in message


async def test_a_server_that_is_down_names_the_fix(postgres_url: str) -> None:
    port = _closed_port()
    message = await _refused(_with(postgres_url, port=str(port)))
    assert f"no PostgreSQL server answers at 127.0.0.1:{port}" in message
    assert "start the server, or fix the host and port" in message


async def test_a_malformed_url_names_the_form(postgres_url: str) -> None:
    message = await _refused(_with(postgres_url, port="abc"))
    assert "not a valid PostgreSQL URL" in message
    assert "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME" in message
    bad_option = await _refused(f"{postgres_url}?sslmod=require")
    assert 'invalid URI query parameter: "sslmod"' in bad_option


async def test_a_newer_schema_is_refused_and_left_alone(postgres_store_url: str) -> None:
    async with Workspace(postgres_store_url) as ws:
        run_id = (await ws.create_run(CONFIG)).run_id
        await ws.append_event(run_id, "phase", {"phase": "searching"})
    execute(postgres_store_url, "UPDATE gepa_schema SET version = ?", (PG_SCHEMA_VERSION + 1,))
    message = await _refused(postgres_store_url)
    assert f"has schema version {PG_SCHEMA_VERSION + 1}" in message
    assert "upgrade gepa-runtime" in message and "Nothing was changed" in message
    execute(postgres_store_url, "UPDATE gepa_schema SET version = ?", (PG_SCHEMA_VERSION,))
    async with Workspace(postgres_store_url) as ws:  # everything still there
        assert [e.type for e in await ws.events_since(run_id)] == ["phase"]


async def test_tables_gepa_runtime_did_not_create_are_refused(postgres_store_url: str) -> None:
    execute(postgres_store_url, "CREATE TABLE runs (id INTEGER)")
    execute(postgres_store_url, "INSERT INTO runs VALUES (7)")
    message = await _refused(postgres_store_url)
    assert "already has a table 'runs' that gepa-runtime did not create" in message
    assert execute(postgres_store_url, "SELECT id FROM runs") == [(7,)]


async def test_openers_that_start_at_once_migrate_once(postgres_store_url: str) -> None:
    stores = [Workspace(postgres_store_url) for _ in range(6)]
    await asyncio.gather(*(ws.open() for ws in stores))
    try:
        assert execute(postgres_store_url, "SELECT version FROM gepa_schema") == [
            (PG_SCHEMA_VERSION,)
        ]
        run_id = (await stores[0].create_run(CONFIG)).run_id
        assert (await stores[5].get_run(run_id)).run_id == run_id
    finally:
        await asyncio.gather(*(ws.close() for ws in stores))


async def test_a_read_only_opener_does_not_create_the_store(postgres_store_url: str) -> None:
    message = await _refused_readonly(postgres_store_url)
    assert (
        "has no gepa-runtime store" in message and "run any writing gepa-runtime command" in message
    )
    assert execute(postgres_store_url, "SELECT to_regclass('gepa_schema') IS NULL") == [(True,)]


async def _refused_readonly(url: str) -> str:
    with pytest.raises(WorkspaceError) as info:
        async with Workspace(url, readonly=True):
            pass
    return str(info.value)


async def test_the_pool_stays_within_its_bound(postgres_store_url: str, rollout) -> None:
    async with Workspace(postgres_store_url, pool_size=3) as ws:
        run_id = (await ws.create_run(CONFIG)).run_id
        records = [rollout(f"s{i}", run_id=run_id) for i in range(60)]
        await asyncio.gather(
            *(ws.record_paid_trials(run_id, [r]) for r in records),
            *(ws.lookup_many([r.cache_key]) for r in records),
        )
        ours = execute(
            postgres_store_url,
            "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'gepa-runtime'",
        )
        assert ours[0][0] <= 3
        assert await ws.count_trials(run_id) == {"paid": 60, "cached": 0, "errors": 0}


def test_a_url_made_into_a_path_is_refused_not_made_a_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="pass the URL as a string"):
        Workspace(Path("postgresql://gepa@db/gepa"))
    assert list(tmp_path.iterdir()) == []


def test_the_cli_names_the_fix_and_makes_no_folder(
    postgres_url: str, postgres_store_url: str, tmp_path: Path, monkeypatch
) -> None:
    """``--workspace postgresql://...`` is a store, never a local folder named
    ``postgresql:``, and a store that is down is said so."""
    monkeypatch.chdir(tmp_path)
    down = _with(postgres_url, port=str(_closed_port()))
    for argv, code, said in (
        (["runs", "list", "--workspace", down], 1, "no PostgreSQL server answers at 127.0.0.1:"),
        (["runs", "list", "--workspace", "mysql://u:pw@h/d"], 2, "is not a workspace"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "optimizer.cli", *argv],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert done.returncode == code, done.stderr
        assert said in done.stderr and "pw@" not in done.stderr
    assert list(tmp_path.iterdir()) == []
    listed = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "runs", "list", "--workspace", postgres_store_url],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert list(tmp_path.iterdir()) == []  # the run files folder is made only when written
