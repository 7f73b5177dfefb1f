"""MkDocs hook: the CLI and config reference pages, generated from the code at build time.

A page holds a marker where the generated text goes:

- ``<!-- generated: cli -->``: every ``gepa-runtime`` command, subcommand and flag, walked
  from the argument parsers of ``optimizer.cli``;
- ``<!-- generated: config -->``: every field of ``schemas.RunConfig`` with its type, default,
  flag, environment variable and meaning (the flag's help, or ``NOTES`` for fields no flag
  sets).

``tests/docs/test_reference.py`` checks the pages against the parsers and the model.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

CLI_MARKER = "<!-- generated: cli -->"
CONFIG_MARKER = "<!-- generated: config -->"

# Config fields that no flag sets: what they mean.
NOTES = {
    "max_merges": "GEPA: at most this many merges in a run (with `use_merge`)",
    "lift_without_holdout": "measure the lift on the seeds that chose the winner when the "
    "program has no holdout seeds, and say so in the report (set by the spec-style Python "
    "API; the CLI and containers refuse a run without holdout seeds)",
    "branch_of": "a branch: the `run_id` and `candidate_id` of a candidate of another run of "
    "the workspace, whose components are this run's baseline (set by `runs branch` and "
    "`POST /api/runs/{run_id}/branch`; see the steering guide)",
}
# Flags whose destination is not the field's name.
FLAG_FIELDS = {"container": "containers", "token": "container_token"}


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("gepa-runtime",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command path (``("gepa-runtime", "optimize", "run")``) with its parser."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)
    ]


def _cell(text: str | None) -> str:
    """Plain text for a table cell (a pipe inside a code span needs no escape, and gets none)."""
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    if action.nargs == 0:
        return names
    value = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return f"{names} `{value}`"


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
    return helps


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """The CLI reference: one section per command, its arguments and flags in a table."""
    out: list[str] = []
    helps: dict[tuple[str, ...], str] = {}
    for path, sub in commands(parser):
        for name, text in _subcommand_help(sub).items():
            helps[(*path, name)] = text
    for path, sub in commands(parser):
        level = "#" * min(len(path) + 1, 4)
        out += [f"{level} `{' '.join(path)}`", ""]
        about = helps.get(path) or sub.description or ""
        if about:
            out += [_cell(about), ""]
        usage = " ".join(sub.format_usage().split())
        out += ["```text", usage.removeprefix("usage: "), "```", ""]
        options = _options(sub)
        if options:
            out += ["| argument | meaning |", "|---|---|"]
            out += [f"| {_argument(a)} | {_cell(a.help)} |" for a in options]
            out.append("")
    return "\n".join(out)


def _type_name(annotation: Any) -> str:
    text = re.sub(r"\btyping\.|pydantic\.types\.|<class '([^']+)'>", r"\1", str(annotation))
    return f"{text[9:-1]} | None" if text.startswith("Optional[") else text


def config_rows(parser: argparse.ArgumentParser) -> dict[str, dict[str, str]]:
    """Each RunConfig field: its type, default, flag and meaning (``optimize run``'s flags)."""
    from schemas import RunConfig

    flags = {FLAG_FIELDS.get(a.dest, a.dest): a for a in _options(parser) if a.option_strings}
    rows: dict[str, dict[str, str]] = {}
    for name, info in RunConfig.model_fields.items():
        default = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
        flag = flags.get(name)
        rows[name] = {
            "type": _type_name(info.annotation),
            "default": repr(default),
            "flag": f"`{flag.option_strings[0]}`" if flag else "(Python, REST)",
            "meaning": (flag.help if flag else NOTES.get(name)) or "",
        }
    return rows


def config_markdown(parser: argparse.ArgumentParser) -> str:
    """The config reference: one table row per RunConfig field."""
    out = ["| field | type | default | flag | meaning |", "|---|---|---|---|---|"]
    for name, row in config_rows(parser).items():
        out.append(
            f"| `{name}` | `{row['type']}` | `{row['default']}` | {row['flag']} "
            f"| {_cell(row['meaning'])} |"
        )
    return "\n".join(out) + "\n"


def run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser of ``gepa-runtime optimize run``: it takes every config flag."""
    return dict(commands(parser))[("gepa-runtime", "optimize", "run")]


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill the markers of a page."""
    if CLI_MARKER not in markdown and CONFIG_MARKER not in markdown:
        return markdown
    from optimizer.cli import build_parser

    parser = build_parser()
    markdown = markdown.replace(CLI_MARKER, cli_markdown(parser))
    return markdown.replace(CONFIG_MARKER, config_markdown(run_parser(parser)))
