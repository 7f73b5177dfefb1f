"""PostgreSQL for tests and benches: a fresh schema on a server the caller names, or a whole
server of one's own to restart at will.

``fresh_schema``: the store's URL carries ``options=-csearch_path=<schema>``, so the store
creates its tables there, and the schema is dropped afterwards. psycopg (the ``[postgres]``
extra) is imported on first use.

``private_server``: a cluster of its own (``initdb`` in a temporary folder, Debian's
binaries, trust logins on 127.0.0.1 and a free port) that a test may restart
(``pg_ctl restart -m fast``), stop and start without touching the server other tests share.
``initdb`` and ``postgres`` refuse root: as root they run as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from optimizer.testing.servers import free_port

__all__ = [
    "PrivateServer",
    "fresh_schema",
    "postgres_binaries",
    "private_server",
    "private_server_missing",
    "with_options",
]


def with_options(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` (libpq's ``options`` parameter)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema}')}"


@contextlib.contextmanager
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


def postgres_binaries() -> Path | None:
    """The folder of Debian's newest PostgreSQL binaries (``initdb``, ``pg_ctl``), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parts[-3])
    return found[-1].parent if found else None


def private_server_missing() -> str | None:
    """Why :func:`private_server` cannot start here, or ``None`` when it can."""
    if postgres_binaries() is None:
        return "no PostgreSQL binaries: apt-get install -y postgresql (Debian)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a postgres user to run the server as"
    return None


@dataclass
class PrivateServer:
    """A running cluster of one's own (see the module docstring)."""

    bin: Path
    data: Path
    port: int

    @property
    def url(self) -> str:
        """The URL of its ``postgres`` database, as the ``postgres`` superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        """``pg_ctl -D DATA ARGS`` (as the ``postgres`` user when root), waiting for it."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data}"
        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60"]
        _as_postgres([*command, "-o", options, "-l", str(self.data / "server.log"), *args])

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection ended, the server back in seconds."""
        self.pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``."""
        self.pg_ctl("stop", "-m", "fast")

    def start(self) -> None:
        """``pg_ctl start``."""
        self.pg_ctl("start")


@contextlib.contextmanager
def private_server() -> Iterator[PrivateServer]:
    """A new cluster on a free port, started; stopped and removed afterwards."""
    binaries = postgres_binaries()
    if binaries is None:
        raise RuntimeError("no PostgreSQL binaries: apt-get install -y postgresql (Debian)")
    folder = Path(tempfile.mkdtemp(prefix="gepa-pg-"))
    data = folder / "data"
    try:
        data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
            shutil.chown(data, "postgres")
        _as_postgres(
            [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]
        )  # fmt: skip
        server = PrivateServer(binaries, data, free_port())
        server.start()
        try:
            yield server
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):
                server.pg_ctl("stop", "-m", "immediate")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_postgres(command: list[str]) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *command], check=True, capture_output=True)
