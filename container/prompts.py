"""Prompts loaded from where the application keeps them: a prompt file or the prompt registry.

``@optimize(baseline=...)`` takes the text itself, a prompt file (a ``pathlib.Path``, or a
one-line string ending in ``.txt``, ``.md``, ``.prompt``, ``.json``, ``.yaml`` or ``.yml``)
or a registry URI (``prompts:/NAME@ALIAS``); the application serving the same prompt reads it
with ``load_prompt`` (or ``load_components`` for several), so what was optimized and what is
served are one artefact. Formats: :mod:`schemas.prompt_file`; the registry:
:mod:`container.prompt_registry`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from container.prompt_registry import fetch_prompt
from schemas import UserError
from schemas.prompt_file import (
    PROMPT_SUFFIXES,
    RegistryRef,
    components_from_registry,
    is_registry_uri,
    parse_registry_uri,
    read_prompt_file,
)
from schemas.template import SYSTEM_COMPONENT

__all__ = ["PromptSource", "load_components", "load_prompt", "prompt_source"]

PromptSource = Path | RegistryRef


def prompt_source(value: object, base_dir: Path | None = None) -> PromptSource | None:
    """Where ``value`` says a prompt lives, or ``None`` when it is the text itself.

    A relative path is looked up beside ``base_dir`` (the decorated function's file), then
    in the working folder. A one-line string with a prompt file's suffix that names no file
    is a ``UserError`` when it has no space (a path with a typo), else the text itself.
    """
    if isinstance(value, os.PathLike):
        return _existing(Path(value), base_dir, str(value), strict=True)
    if not isinstance(value, str):
        return None
    if is_registry_uri(value):
        return parse_registry_uri(value)
    text = value.strip()
    if "\n" in text or Path(text).suffix.lower() not in PROMPT_SUFFIXES:
        return None
    return _existing(Path(text), base_dir, text, strict=not any(c.isspace() for c in text))


def _existing(path: Path, base_dir: Path | None, given: str, *, strict: bool) -> Path | None:
    places = [path] if path.is_absolute() else [*([base_dir / path] if base_dir else []), path]
    found = next((p for p in places if p.is_file()), None)
    if found is None and strict:
        looked = " and ".join(str(p.resolve()) for p in places)
        raise UserError(
            f"the prompt file {given!r} does not exist (looked at {looked}); fix the path, "
            "or pass the prompt's text itself"
        )
    return found.resolve() if found is not None else None


def load_components(
    source: str | os.PathLike[str] | PromptSource,
    *,
    component: str = SYSTEM_COMPONENT,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The components a prompt file or registry version holds (one text is
    ``{component: text}``)."""
    where = source if isinstance(source, RegistryRef) else prompt_source(source, base_dir)
    if where is None:
        raise UserError(
            f"{str(source)[:80]!r} names no prompt file or registry version: pass a path "
            "(.txt, .md, .prompt, .json, .yaml) or prompts:/NAME@ALIAS"
        )
    if isinstance(where, Path):
        return read_prompt_file(where, component)
    version = fetch_prompt(where, environ=environ)
    return components_from_registry(version.text, version.tags, where.uri, component)


def load_prompt(
    source: str | os.PathLike[str],
    *,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The one text of a prompt file or registry version (what an application serves)."""
    components = load_components(source, base_dir=base_dir, environ=environ)
    if len(components) != 1:
        raise UserError(
            f"{source} holds {len(components)} components ({', '.join(components)}): "
            "read them with load_components"
        )
    return next(iter(components.values()))
