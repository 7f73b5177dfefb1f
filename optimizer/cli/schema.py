"""``gepa-runtime schema``: print the JSON Schema of every wire model."""

from __future__ import annotations

import argparse

from schemas import json_schemas_text

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``schema``."""
    parser = sub.add_parser("schema", help="print the JSON Schema of every gepa-container/1 model")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    print(json_schemas_text())
    return 0
