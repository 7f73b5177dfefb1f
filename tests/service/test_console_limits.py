"""The console shows the adaptive concurrency limit and a rate limit the run is waiting on.

The digest folds ``concurrency`` events and the rate-limit warnings (the runner's side:
tests/optimizer/test_limit_watch.py, tests/e2e/test_rate_limit_e2e.py); the browser test
writes a run's events straight into the workspace log, as the runner would, and reads the
page in headless Chromium against a real service.
"""

from __future__ import annotations

import asyncio
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.runtime.lifecycle.progress import ProgressBar
from optimizer.service import RunDigest
from schemas import Event
from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process
from workspace import Workspace

URL = "http://127.0.0.1:9/replica"
CUT = {
    "limit": 4,
    "max": 32,
    "endpoints": [{"url": URL, "limit": 4, "max": 32, "in_flight": 4, "cuts": 6}],
}
WAITING = {
    "message": f"waiting on the container's rate limit: {URL} has answered only 429 for 35 s",
    "rate_limit": {"url": URL, "waited_s": 35.0, "wait_s": 600.0, "retry_after_s": 5.0, "limit": 1},
}
CLEARED = {
    "message": f"the container's rate limit at {URL} cleared after 80 s or a little more",
    "rate_limit": {"url": URL, "cleared": True},
}


def _event(seq: int, kind: str, data: dict[str, Any]) -> Event:
    return Event(seq=seq, run_id="r", type=kind, data=data, ts=100.0 + seq)


def test_the_digest_keeps_the_last_limit_and_a_rate_limit_until_it_clears() -> None:
    digest = RunDigest()
    digest.fold(_event(1, "concurrency", {"limit": 32, "max": 32, "endpoints": []}))
    digest.fold(_event(2, "concurrency", CUT))
    digest.fold(_event(3, "warning", WAITING))
    assert digest.concurrency == CUT
    assert digest.rate_limit == {**WAITING["rate_limit"], "at": 103.0}
    assert digest.as_dict()["concurrency"]["limit"] == 4
    digest.fold(_event(4, "warning", {"message": "some other warning"}))
    assert digest.rate_limit is not None
    digest.fold(_event(5, "warning", CLEARED))
    assert digest.rate_limit is None


def test_the_cli_progress_line_shows_the_limit_only_while_it_is_cut() -> None:
    bar = ProgressBar(stream=io.StringIO())
    bar(_event(1, "concurrency", {"limit": 32, "max": 32}))
    assert "in flight" not in bar.line()
    bar(_event(2, "concurrency", CUT))
    assert bar.line().endswith("| in flight <= 4/32")
    bar(_event(3, "concurrency", {"limit": 32, "max": 32}))
    assert "in flight" not in bar.line()


def _append(root: Path, run_id: str, events: list[tuple[str, dict[str, Any]]]) -> None:
    async def write() -> None:
        async with Workspace(root) as workspace:
            await workspace.update_run(run_id, status="running")  # as a CLI process executing it
            for kind, data in events:
                await workspace.append_event(run_id, kind, data)

    # playwright's sync API runs an event loop in this thread, so the write gets its own thread
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


@pytest.mark.browser
@pytest.mark.e2e
def test_the_run_page_shows_the_limit_and_the_rate_limit_wait(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    with serve_process(root, token=TOKEN) as (url, _):
        run_id = create_run(url, run_config(reflection_url))
        _append(
            root,
            run_id,
            [
                ("phase", {"phase": "searching"}),
                ("concurrency", {"limit": 32, "max": 32, "endpoints": []}),
                ("concurrency", CUT),
                ("warning", WAITING),
            ],
        )
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
        page.wait_for_selector("#ratelimit:not([hidden])", timeout=15_000)
        limit = page.inner_text("#concurrency")
        banner = page.inner_text("#ratelimit")
        view = httpx.get(
            f"{url}/api/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}
        ).json()
        _append(root, run_id, [("warning", CLEARED)])
        page.wait_for_selector("#ratelimit", state="hidden", timeout=15_000)
        activity = page.inner_text("#activity")
        page.close()
    assert not errors, errors
    assert limit == "in flight at once: limit 4 of 32 (cut by 429/503 answers; 6 cuts so far)"
    assert banner.startswith(
        f"Waiting on the container's rate limit: {URL} has answered only 429 for"
    )
    assert "slowed to 1 at a time" in banner and "up to 600 s (--rate-limit-wait)" in banner
    assert view["concurrency"]["limit"] == 4 and view["rate_limit"]["waited_s"] == 35.0
    assert "rollouts in flight: limit 4 of 32" in activity
    assert "warning: the container's rate limit at" in activity
