"""Helpers of the browser tests: headless Chromium (Debian's ``chromium`` driven by ``playwright``)
and a ``gepa-runtime serve`` process to point it at.

Needs ``apt-get install -y chromium`` and ``pip install -e '.[browser]'`` (never
``playwright install``). Without them the tests skip, unless ``GEPA_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

__all__ = ["TOKEN", "chromium", "create_run"]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "console-token-42"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GEPA_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GEPA_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium; skips the test (or fails it, see above) when there is none."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install -e '.[browser]'")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        _unavailable("Debian's chromium is not installed: apt-get install -y chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def create_run(url: str, config: dict[str, Any]) -> str:
    """Create a run through the service's API (with ``TOKEN``); returns its id."""
    response = httpx.post(
        f"{url}/api/runs", json={"config": config}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])
