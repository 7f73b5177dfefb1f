"""The live console in headless Chromium (see :mod:`tests.service.console` for what it needs).

``GEPA_UPDATE_SCREENSHOT=1`` also writes the finished run page to ``docs/console.png``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import toy_container
from tests.fakes.servers import ROOT
from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_console_updates_live_without_reload(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    with (
        toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "0.05"}) as container,
        serve_process(tmp_path / "ws", token=TOKEN, extra=["--heartbeat", "1"]) as (url, _),
    ):
        run_id = create_run(url, run_config(reflection_url, container=container, concurrency=2))
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
        page.evaluate("window.__sameDocument = true")
        page.wait_for_selector("#phase.created")
        assert page.inner_text("#paid") == "0" and page.locator("#feed .trial").count() == 0
        page.click("#start")  # the console's own button starts the run

        page.wait_for_selector("#phase.evaluating_baseline, #phase.searching", timeout=20_000)
        page.wait_for_function(
            "Number(document.getElementById('paid').textContent) > 0", timeout=20_000
        )
        first_paid = int(page.inner_text("#paid"))
        page.wait_for_function(
            "document.querySelectorAll('#feed .trial').length > 0", timeout=20_000
        )
        page.wait_for_selector("#phase.searching", timeout=30_000)
        page.wait_for_function(
            f"Number(document.getElementById('paid').textContent) > {first_paid}", timeout=20_000
        )
        assert page.inner_text("#limit") == "200"
        assert "last runner event" in page.inner_text("#live-text")
        page.screenshot(path=str(tmp_path / "console-live.png"), full_page=True)

        page.wait_for_selector("#phase.completed", timeout=90_000)
        page.wait_for_selector("#promotion:not([hidden])", timeout=20_000)
        assert (
            page.evaluate("window.__sameDocument") is True
        )  # every change arrived without a reload
        assert "Promoted" in page.inner_text("#promotion")
        assert page.locator("pre.diff .add").count() >= 1
        assert page.locator("#candidates tbody tr").count() >= 2
        assert page.locator("#frontier td.cell.win").count() >= 1
        assert page.locator("#chart circle").count() >= 2
        paid = httpx.get(f"{url}/api/runs/{run_id}", params={"token": TOKEN}).json()["budget"][
            "paid"
        ]
        assert page.inner_text("#paid") == str(paid)

        page.locator("#feed .trial").first.click()
        page.wait_for_selector("#drawer:not([hidden]) .msg.system", timeout=10_000)
        assert "verifier feedback" in page.inner_text("#drawer").lower()
        page.click("#drawer-close")
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(400)
        page.screenshot(path=str(tmp_path / "console-finished.png"), full_page=True)
        if os.environ.get("GEPA_UPDATE_SCREENSHOT") == "1":
            page.screenshot(path=str(ROOT / "docs" / "console.png"), full_page=True)

        index = browser.new_page(viewport={"width": 1280, "height": 700})
        index.goto(f"{url}/?token={TOKEN}")
        index.wait_for_selector(f"tr[data-run='{run_id}'] .chip.completed", timeout=10_000)
        index.screenshot(path=str(tmp_path / "console-index.png"))
        index.click(f"tr[data-run='{run_id}'] a")
        index.wait_for_selector("#phase.completed", timeout=10_000)
        assert f"token={TOKEN}" in index.url
        index.close()
        page.close()
    assert not errors, errors


def test_console_says_when_the_runner_goes_quiet_and_asks_for_a_token(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    with (
        toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "4"}) as container,
        serve_process(
            tmp_path / "ws", token=TOKEN, extra=["--heartbeat", "0.5", "--quiet-after", "1.5"]
        ) as (url, _),
    ):
        run_id = create_run(url, run_config(reflection_url, container=container, concurrency=1))
        httpx.post(f"{url}/api/runs/{run_id}/start", headers={"Authorization": f"Bearer {TOKEN}"})
        page = browser.new_page()
        page.goto(f"{url}/runs/{run_id}")
        assert "Token needed" in page.inner_text("main") and "GEPA_SERVE_TOKEN" in page.inner_text(
            "main"
        )
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#quiet:not([hidden])", timeout=15_000)
        assert "No news from the runner for" in page.inner_text("#quiet")
        page.screenshot(path=str(tmp_path / "console-quiet.png"))
        page.goto(f"{url}/runs/run-does-not-exist?token={TOKEN}")
        assert "Unknown run" in page.inner_text("main") and "list of runs" in page.inner_text(
            "main"
        )
        page.close()
