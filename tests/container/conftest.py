"""Shared helpers for the container SDK tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from container import Registry, Target, optimize

LABELS = [
    "card_arrival",
    "card_arrival",
    "card_arrival",
    "card_arrival",
    "card_arrival",
    "lost_card",
    "lost_card",
    "lost_card",
    "lost_card",
    "lost_card",
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines and return ``path``."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_target(fn: Callable[..., Any], **options: Any) -> Target:
    """Decorate ``fn`` into a private registry and return its ``Target``."""
    options.setdefault("id", "test-target")
    options.setdefault("baseline", "Classify the message.")
    registry = Registry()
    optimize(registry=registry, **options)(fn)
    return registry.get(options["id"])


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    """Ten labelled rows, two labels."""
    return [
        {"id": f"row-{i}", "text": f"message {i}", "label": label} for i, label in enumerate(LABELS)
    ]


@pytest.fixture
def dataset_path(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` written to a JSONL file."""
    return write_jsonl(tmp_path / "data.jsonl", rows)


@pytest.fixture
def client_for() -> Callable[..., Any]:
    """Build an in-process ``httpx.AsyncClient`` for an ASGI app."""

    def build(app: Any, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://container", **kwargs
        )

    return build
