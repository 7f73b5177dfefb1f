"""Why a PostgreSQL store could not be reached, said as what to fix.

libpq's messages name the symptom ("password authentication failed", "Connection refused");
a user needs the fix: which part of ``--workspace`` (or the server) to change. Every message
names the server as ``host:port`` and the URL with its password masked.
"""

from __future__ import annotations

import re

import psycopg

from schemas.exceptions import WorkspaceError
from workspace.location import mask_url

__all__ = ["bad_url", "connect_failed", "server_of"]


def server_of(url: str) -> dict[str, str]:
    """The ``host``, ``port``, ``user`` and ``dbname`` the URL names (libpq's defaults shown)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        info = {}
    return {
        "host": str(info.get("host") or "localhost"),
        "port": str(info.get("port") or "5432"),
        "user": str(info.get("user") or "(your login name)"),
        "dbname": str(info.get("dbname") or info.get("user") or "(your login name)"),
    }


def bad_url(url: str, exc: Exception) -> WorkspaceError:
    """A URL libpq cannot parse."""
    text = str(exc).replace(url, mask_url(url)).strip()  # libpq quotes the whole URL
    detail = text.splitlines()[0] if text else type(exc).__name__
    return WorkspaceError(
        f"--workspace {mask_url(url)}: not a valid PostgreSQL URL ({detail}); write it as "
        "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?PARAM=VALUE] with libpq parameters "
        "(e.g. sslmode=require)"
    )


def connect_failed(url: str, exc: psycopg.Error) -> WorkspaceError:
    """The error for a connection that failed, naming what to fix."""
    s = server_of(url)
    where = f"{s['host']}:{s['port']}"
    text = str(exc)
    if isinstance(exc, psycopg.ProgrammingError) or "invalid" in text and "option" in text:
        return bad_url(url, exc)
    if "password authentication failed" in text or "no password supplied" in text:
        return WorkspaceError(
            f"PostgreSQL at {where} refused the login of user {s['user']!r} (wrong or missing "
            "password): fix the password in --workspace / GEPA_WORKSPACE, or set it in "
            "PGPASSWORD or ~/.pgpass (which keep it out of the URL); nothing was changed"
        )
    missing = re.search(r'database "([^"]+)" does not exist', text)
    if missing:
        name = missing.group(1)
        return WorkspaceError(
            f"PostgreSQL at {where} has no database {name!r}: create it (createdb -h "
            f'{s["host"]} -p {s["port"]} -U {s["user"]} {name}, or CREATE DATABASE "{name}" '
            f'OWNER "{s["user"]}"), or fix the database name at the end of --workspace'
        )
    role = re.search(r'role "([^"]+)" does not exist', text)
    if role:
        return WorkspaceError(
            f"PostgreSQL at {where} has no user {role.group(1)!r}: fix the user in --workspace "
            "or create the role (CREATE ROLE ... LOGIN PASSWORD ...)"
        )
    if "Connection refused" in text or "No such file or directory" in text:
        return WorkspaceError(
            f"no PostgreSQL server answers at {where} (connection refused): start the server, "
            "or fix the host and port in --workspace / GEPA_WORKSPACE"
        )
    if "resolve host" in text or "translate host name" in text:
        return WorkspaceError(
            f"cannot resolve the PostgreSQL host {s['host']!r}: fix the host in --workspace "
            "/ GEPA_WORKSPACE"
        )
    if "timeout expired" in text:
        return WorkspaceError(
            f"PostgreSQL at {where} did not answer in time (connect_timeout): check that the "
            "server is up and reachable from here (a firewall?), or raise connect_timeout in "
            "the URL"
        )
    text = text.replace(url, mask_url(url)).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return WorkspaceError(f"cannot connect to PostgreSQL at {where} ({mask_url(url)}): {first}")
