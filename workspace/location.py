"""Where a workspace lives: a folder (SQLite, the default) or a PostgreSQL URL.

``--workspace`` (or ``GEPA_WORKSPACE``) takes either. A value with a URL scheme is never a
folder name: ``postgresql://`` and ``postgres://`` open the PostgreSQL store, and any other
scheme is a ``UserError`` that says what is accepted (a folder named ``postgresql:`` would
otherwise be created without a word). The URL is shown with its password masked, always:
it is printed in hints and logs, and stored nowhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from schemas.exceptions import UserError

__all__ = ["DEFAULT_WORKSPACE", "DatabaseURL", "mask_url", "resolve_workspace", "workspace_target"]

DEFAULT_WORKSPACE = ".gepa"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES = ("postgresql", "postgres")
_FOLDED = re.compile(r"^(postgresql|postgres):$", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@dataclass(frozen=True)
class DatabaseURL:
    """A PostgreSQL connection URL; ``str()`` masks the password (see :func:`mask_url`)."""

    url: str

    def __str__(self) -> str:
        return mask_url(self.url)


def workspace_target(value: str | os.PathLike[str] | DatabaseURL) -> Path | DatabaseURL:
    """A folder, or the PostgreSQL URL ``value`` names; another URL scheme is a ``UserError``."""
    if isinstance(value, DatabaseURL):
        return value
    if isinstance(value, Path) and value.parts and _FOLDED.match(value.parts[0]):
        # Path("postgresql://u@h/db") is "postgresql:/u@h/db": the URL was lost on the way.
        raise UserError(
            f"workspace {value}: a URL made into a path loses its '//'; pass the URL as a "
            "string (postgresql://USER@HOST:PORT/DBNAME)"
        )
    if isinstance(value, Path):
        return value
    text = os.fspath(value)
    match = _SCHEME.match(text)
    if match is None:
        return Path(text).expanduser()
    scheme = match.group(1).lower()
    if scheme in _POSTGRES:
        return DatabaseURL(text)
    hint = ""
    if scheme.startswith(("postgresql+", "postgres+")):
        hint = f" (drop the driver suffix: postgresql://{text[match.end() :]})"
    raise UserError(
        f"--workspace / GEPA_WORKSPACE {mask_url(text)!r}: the scheme {scheme!r} is not a "
        "workspace; give a folder (SQLite, e.g. ./.gepa) or a PostgreSQL URL "
        f"postgresql://USER@HOST:PORT/DBNAME{hint}"
    )


def resolve_workspace(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> Path | DatabaseURL:
    """The workspace: explicit ``path`` > ``$GEPA_WORKSPACE`` > ``./.gepa``; a folder or a
    PostgreSQL URL (see :func:`workspace_target`)."""
    environ = os.environ if env is None else env
    chosen = path or environ.get("GEPA_WORKSPACE") or DEFAULT_WORKSPACE
    return workspace_target(chosen)
