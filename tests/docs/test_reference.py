"""The reference pages say what the code has: every CLI command and flag, every REST route,
every config field and every key of the evidence packet."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Mount, Route

from optimizer.cli import build_parser
from optimizer.service import create_app
from schemas import RunConfig
from tests.docs.pages import page, reference_hook

HOOK = reference_hook()


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("gepa-runtime",)
) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """Every command path and its option strings, walked here apart from the hook's own walk."""
    options: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            options += action.option_strings or [str(action.metavar or action.dest.upper())]
    yield path, options


def _sections(markdown: str) -> dict[str, str]:
    """The generated CLI page cut at its command headings: command -> its section."""
    parts = re.split(r"^#+ `([^`]+)`$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_cli_command_and_flag_is_on_the_cli_page() -> None:
    assert HOOK.CLI_MARKER in page("reference/cli.md")
    sections = _sections(HOOK.cli_markdown(build_parser()))
    walked = dict(_walk(build_parser()))
    assert ("gepa-runtime", "optimize", "run") in walked and len(walked) >= 15
    assert set(sections) == {" ".join(path) for path in walked}
    for path, options in walked.items():
        section = sections[" ".join(path)]
        missing = [o for o in options if f"`{o}`" not in section]
        assert not missing, f"{' '.join(path)}: {missing} not on the CLI page"


def test_every_config_field_is_on_the_config_page_with_its_meaning() -> None:
    assert HOOK.CONFIG_MARKER in page("reference/config.md")
    parser = HOOK.run_parser(build_parser())
    rows = HOOK.config_rows(parser)
    assert list(rows) == list(RunConfig.model_fields)
    assert not [name for name, row in rows.items() if not row["meaning"]], "fields with no meaning"
    table = HOOK.config_markdown(parser)
    for name in RunConfig.model_fields:
        assert re.search(rf"^\| `{name}` \|", table, re.M), name
    flag = next(a for a in parser._actions if a.dest == "max_metric_calls")
    assert rows["max_metric_calls"]["flag"] == f"`{flag.option_strings[0]}`"


def _routes(tmp_path: Path) -> set[tuple[str, str]]:
    app = create_app(tmp_path / "ws")
    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, Route):
            path = re.sub(r":\w+}", "}", route.path)
            found |= {(m, path) for m in route.methods or () if m != "HEAD"}
        elif isinstance(route, Mount):
            found.add(("GET", f"{route.path}/..."))
    return found


def test_every_rest_route_is_on_the_rest_page(tmp_path: Path) -> None:
    rest = page("reference/rest.md")
    documented = set(re.findall(r"^\| `([A-Z]+)` \| `([^`]+)` \|", rest, re.M))
    routes = _routes(tmp_path)
    assert ("POST", "/api/runs") in routes and ("GET", "/api/runs/{run_id}/events") in routes
    assert routes - documented == set(), "routes missing from docs/reference/rest.md"
    assert documented - routes == set(), "docs/reference/rest.md names routes the app lacks"


@pytest.fixture(scope="module")
def packet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The evidence packet of a real run: the getting-started example on the docs' fake models."""
    from tests.docs.test_runnable import run_block

    code = next(c for lang, c in _getting_started_blocks() if lang == "python")
    folder = tmp_path_factory.mktemp("packet")
    run_block(code, folder)
    (found,) = folder.glob(".gepa/runs/*/evidence.json")
    return dict(json.loads(found.read_text()))


def _getting_started_blocks() -> list[tuple[str, str]]:
    from tests.docs.pages import DOCS, runnable_blocks

    return runnable_blocks(DOCS / "getting-started.md")


def _documented(text: str, key: str) -> bool:
    """``key`` is written as `key` or as the last part of `section.key`."""
    return re.search(rf"[`.]{re.escape(key)}`", text) is not None


def test_every_key_of_a_real_evidence_packet_is_on_its_page(packet: dict[str, Any]) -> None:
    text = page("reference/evidence.md")
    top = text.split("\n## ", 2)[1]
    assert not [k for k in packet if not _documented(top, k)], "top-level keys missing"
    missing = []
    for name, value in packet.items():
        if name == "config":
            continue
        rows = value[0] if isinstance(value, list) and value else value
        if isinstance(rows, dict) and name not in ("per_seed",):
            section = re.split(rf"^## .*`{name}`.*$", text, maxsplit=1, flags=re.M)
            assert len(section) == 2, f"no section for {name}"
            body = section[1].split("\n## ", 1)[0]
            missing += [f"{name}.{k}" for k in rows if not _documented(body, k)]
    assert not missing, f"evidence keys missing from docs/reference/evidence.md: {missing}"
    assert packet["version"] and packet["candidates"] and packet["traces"]
