"""Prompt files and prompt-registry URIs: where a candidate's texts live outside the workspace.

The winner of a run goes where the application loads its prompt from, and the container
loads its baseline from the same place, so the optimized prompt and the served prompt are one
artefact. A **prompt file** holds a program's components in one of three formats, chosen by
its suffix:

- ``.json``: an object of component name -> text;
- ``.yaml`` / ``.yml``: the same mapping, each text a literal block (:mod:`schemas.prompt_yaml`);
- any other suffix (``.txt``, ``.md``, ``.prompt``...): the text of a one-component program.
  The file ends with a line break: writing adds one, reading drops one, so an editor that
  adds a final newline does not change the candidate.

A **registry URI** names a version in MLflow's prompt registry: ``prompts:/NAME@ALIAS`` or
``prompts:/NAME/VERSION``. A version holds one text; for a program of several components it
holds their JSON object and the version tag ``gepa.format=components-json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from schemas.exceptions import UserError
from schemas.prompt_yaml import dump_components, parse_components
from schemas.template import SYSTEM_COMPONENT

__all__ = [
    "COMPONENTS_JSON",
    "FORMAT_TAG",
    "MAPPING_SUFFIXES",
    "PROMPT_SUFFIXES",
    "REGISTRY_SCHEME",
    "RegistryRef",
    "components_from_registry",
    "is_registry_uri",
    "parse_registry_uri",
    "prompt_file_text",
    "read_prompt_file",
    "registry_text",
    "write_prompt_file",
]

MAPPING_SUFFIXES = frozenset({".json", ".yaml", ".yml"})
# Suffixes that make a one-line string a file path where text is also accepted (a baseline).
PROMPT_SUFFIXES = MAPPING_SUFFIXES | {".txt", ".md", ".prompt", ".text"}
REGISTRY_SCHEME = "prompts:/"
FORMAT_TAG = "gepa.format"
COMPONENTS_JSON = "components-json"
_URI = re.compile(r"^prompts:/([^/@]+)(?:@([^/@]+)|/(\d+))$")


def read_prompt_file(path: str | Path, component: str = SYSTEM_COMPONENT) -> dict[str, str]:
    """The components in a prompt file (a text file is ``{component: text}``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot read the prompt file {path}: {exc.strerror or exc}; pass an existing file"
        ) from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"the prompt file {path} is not UTF-8 text: {exc}") from exc
    suffix = path.suffix.lower()
    if suffix == ".json":
        return components_from_json(text, str(path))
    if suffix in MAPPING_SUFFIXES:
        return parse_components(text, str(path))
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    return {component: text}


def components_from_json(text: str, where: str) -> dict[str, str]:
    """A JSON object of component name -> text; ``UserError`` naming ``where`` otherwise."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not data:
        raise UserError(
            f'{where} must hold a JSON object of component name -> text, e.g. {{"system_prompt": "..."}}'
        )
    bad = [str(k) for k, v in data.items() if not k or not isinstance(v, str)]
    if bad:
        raise UserError(f"{where}: every component's value must be text; not: {', '.join(bad)}")
    return dict(data)


def prompt_file_text(path: str | Path, components: Mapping[str, str]) -> str:
    """What ``write_prompt_file`` writes to ``path`` (its format from the suffix)."""
    path, data = Path(path), dict(components)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if suffix in MAPPING_SUFFIXES:
        return dump_components(data)
    if len(data) != 1:
        raise UserError(
            f"{path} would hold one text, but the program has {len(data)} components "
            f"({', '.join(data)}): name a .json or .yaml file"
        )
    return next(iter(data.values())) + "\n"


def write_prompt_file(path: str | Path, components: Mapping[str, str]) -> Path:
    """Write ``components`` to ``path`` in the format its suffix names; the path written."""
    path = Path(path)
    text = prompt_file_text(path, components)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write the prompt file {path}: {exc.strerror or exc}; "
            "name a file in an existing, writable folder"
        ) from exc
    return path


@dataclass(frozen=True)
class RegistryRef:
    """A prompt-registry version: by ``alias`` or by ``version`` number."""

    name: str
    alias: str | None = None
    version: int | None = None

    @property
    def uri(self) -> str:
        """``prompts:/NAME@ALIAS`` or ``prompts:/NAME/VERSION``."""
        where = f"@{self.alias}" if self.alias is not None else f"/{self.version}"
        return f"{REGISTRY_SCHEME}{self.name}{where}"


def is_registry_uri(value: object) -> bool:
    """Whether ``value`` is a string in the ``prompts:/`` scheme (well formed or not)."""
    return isinstance(value, str) and value.startswith(REGISTRY_SCHEME)


def parse_registry_uri(uri: str) -> RegistryRef:
    """The name and alias (or version) of ``prompts:/NAME@ALIAS`` / ``prompts:/NAME/VERSION``."""
    match = _URI.match(uri.strip())
    if match is None:
        raise UserError(
            f"{uri!r} is not a prompt-registry URI: write prompts:/NAME@ALIAS "
            "(e.g. prompts:/support-triage@production) or prompts:/NAME/VERSION"
        )
    name, alias, version = match.groups()
    return RegistryRef(name, alias, int(version) if version else None)


def registry_text(components: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The text a registry version holds for ``components``, and the version tags that say
    how to read it back (``components_from_registry``)."""
    data = dict(components)
    if len(data) == 1:
        return next(iter(data.values())), {}
    return json.dumps(data, indent=2, ensure_ascii=False), {FORMAT_TAG: COMPONENTS_JSON}


def components_from_registry(
    text: str, tags: Mapping[str, str], where: str, component: str = SYSTEM_COMPONENT
) -> dict[str, str]:
    """The components a registry version holds (its one text is ``{component: text}``)."""
    if tags.get(FORMAT_TAG) == COMPONENTS_JSON:
        return components_from_json(text, where)
    return {component: text}
