"""Steering a run from the console in headless Chromium (see :mod:`tests.service.console`).

A person's actions are ``action`` events of the run (``{"action", "source", ...}``): the page
folds them into its steering bar, the candidates' tags and the timeline, whoever logged them
(the console's buttons through ``POST /api/runs/{run_id}/actions``, the CLI through the
workspace). ``GEPA_UPDATE_SCREENSHOT=1`` also writes the guide's screenshots
(``docs/steering-*.png``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from optimizer.service import create_app
from optimizer.testing import toy_container
from tests.fakes.servers import ROOT
from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process
from workspace import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def _shot(page: Any, name: str, **options: Any) -> None:
    """Keep a screenshot of the guide (``docs/<name>``) when asked to."""
    if os.environ.get("GEPA_UPDATE_SCREENSHOT") == "1":
        page.screenshot(path=str(ROOT / "docs" / name), **options)


def _has_actions_route(tmp_path: Path) -> bool:
    app = create_app(tmp_path / "probe")
    return any(
        isinstance(r, Route)
        and r.path == "/api/runs/{run_id}/actions"
        and "POST" in (r.methods or ())
        for r in app.routes
    )


def _wait_view(url: str, run_id: str, ready: Any, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        view: dict[str, Any] = httpx.get(f"{url}/api/runs/{run_id}", headers=HEADERS).json()
        if ready(view):
            return view
        assert time.monotonic() < deadline, f"run {run_id}: {view['status']}/{view['phase']}"
        time.sleep(0.2)


def _children(url: str, run_id: str) -> list[str]:
    ranked = httpx.get(f"{url}/api/runs/{run_id}/candidates", headers=HEADERS).json()
    return [c["candidate_id"] for c in ranked["candidates"] if c["origin"] != "seed"]


def _log_actions(root: Path, run_id: str, *actions: dict[str, Any]) -> None:
    """Append ``actions`` to the run's event log as another process would (the CLI's way);
    in a thread of its own, as playwright's loop holds this one."""

    async def append() -> None:
        async with Workspace(root) as ws:
            for action in actions:
                await ws.append_event(run_id, "action", action)

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, append()).result()


@pytest.fixture
def live(tmp_path: Path, reflection_url: str) -> Iterator[tuple[str, str, Path]]:
    """A run searching slowly on a served workspace: (service URL, run id, workspace)."""
    with (
        toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "0.25"}) as container,
        serve_process(tmp_path / "ws", token=TOKEN, extra=["--heartbeat", "0.5"]) as (url, _),
    ):
        config = run_config(
            reflection_url, container=container, concurrency=1, max_metric_calls=400
        )
        run_id = create_run(url, config)
        httpx.post(f"{url}/api/runs/{run_id}/start", headers=HEADERS)
        _wait_view(url, run_id, lambda v: v["phase"] == "searching" and v["candidates"] >= 2)
        try:
            yield url, run_id, tmp_path / "ws"
        finally:
            httpx.post(f"{url}/api/runs/{run_id}/cancel", headers=HEADERS, timeout=30)


def test_the_buttons_pause_resume_reject_and_note_a_live_run(
    browser: Any, live: tuple[str, str, Path], tmp_path: Path
) -> None:
    if not _has_actions_route(tmp_path):
        pytest.skip("needs POST /api/runs/{run_id}/actions (the steering actions' branch)")
    url, run_id, _ = live
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
    page.wait_for_selector("#pause:not([hidden])", timeout=20_000)

    page.click("#pause")
    page.wait_for_selector("#activity li.action-pause", timeout=10_000)
    assert "(console)" in page.inner_text("#activity li.action-pause")
    page.wait_for_selector("#resume:not([hidden])")
    assert "paused" in page.inner_text("#steer-state")

    child = _children(url, run_id)[0]
    page.click(f"#candidates tr[data-candidate='{child}']")
    page.click("#c-reject")
    page.fill("#ask-reason", "it games the verifier")
    page.click("#ask-ok")
    page.wait_for_selector("#activity li.action-reject", timeout=10_000)
    assert "it games the verifier" in page.inner_text("#activity li.action-reject")
    page.wait_for_selector(f"#candidates tr[data-candidate='{child}'] .tag.rejected")
    page.click("#drawer-close")

    page.click("#note")
    page.fill("#ask-text", "look at the labels the student never saw")
    page.click("#ask-ok")
    page.wait_for_selector("#activity li.action-note", timeout=10_000)

    page.click("#resume")
    page.wait_for_selector("#activity li.action-resume", timeout=10_000)
    page.wait_for_selector("#pause:not([hidden])")
    lines = page.locator("#activity li.action").all_inner_texts()
    assert len(lines) == 4 and all("(console)" in line for line in lines)
    _shot(page, "steering-live.png", full_page=True)
    page.close()
    assert not errors, errors


def test_the_timeline_and_the_candidate_page_show_what_people_did(
    browser: Any, live: tuple[str, str, Path]
) -> None:
    url, run_id, root = live
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
    page.wait_for_selector("#phase.searching", timeout=20_000)
    assert not page.locator("#pause").is_hidden()  # a running run can be paused, noted, stopped
    assert not page.locator("#note").is_hidden() and not page.locator("#stop").is_hidden()
    before = page.locator("#activity li.action").count()
    child = _children(url, run_id)[0]
    _log_actions(
        root,
        run_id,
        {"action": "pin", "source": "cli", "candidate_id": child},
        {"action": "note", "source": "rest", "candidate_id": None, "text": "mind the look-alikes"},
        {"action": "reject", "source": "console", "candidate_id": child, "reason": "off policy"},
    )
    page.wait_for_function(
        f"document.querySelectorAll('#activity li.action').length === {before + 3}",
        timeout=15_000,
    )
    pin, note, reject = reversed(page.locator("#activity li.action").all_inner_texts()[:3])
    assert "pinned" in pin and "(cli)" in pin
    assert "note (rest) for every proposal: mind the look-alikes" in note
    assert "rejected" in reject and "(console): off policy" in reject
    assert all(line[:8].count(":") == 2 for line in (pin, note, reject))  # each with its time
    row = f"#candidates tr[data-candidate='{child}']"
    page.wait_for_selector(f"{row} .tag.rejected")
    assert "1 rejected" in page.inner_text("#steer-state")

    page.click(row)
    page.wait_for_selector("#c-why ol.decisions li.kind-person", timeout=10_000)
    why = page.inner_text("#c-why")
    assert "rejected by a person (console): off policy" in why
    assert "pinned by a person (cli)" in why and "created" in why
    assert "rejected by a person" in page.inner_text("#c-why .decision")  # whatever came after
    assert page.locator("#c-reject").count() == page.locator("#c-pin").count() == 0  # rejected
    assert page.locator("#c-note").count() == 1 and page.locator("#c-branch").count() == 1
    _shot(page, "steering-candidate.png")
    page.close()
    assert not errors, errors


def test_compare_why_and_a_branch_from_the_console_on_a_finished_run(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    with (
        toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "0.02"}) as container,
        serve_process(tmp_path / "ws", token=TOKEN, extra=["--heartbeat", "1"]) as (url, _),
    ):
        run_id = create_run(url, run_config(reflection_url, container=container, concurrency=2))
        httpx.post(f"{url}/api/runs/{run_id}/start", headers=HEADERS)
        view = _wait_view(url, run_id, lambda v: v["status"] == "completed" and not v["active"])
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
        page.wait_for_selector("#phase.completed", timeout=20_000)
        assert page.locator("#pause").is_hidden() and page.locator("#stop").is_hidden()

        best = view["best"]["candidate_id"]
        page.click(f"#candidates tr[data-candidate='{best}']")
        page.wait_for_selector("#c-why ol.decisions li.kind-winner", timeout=10_000)
        assert "winner, promoted" in page.inner_text("#c-why .decision")
        assert page.locator("#c-reject").count() == 0  # a finished run takes no reject
        page.click("#drawer-close")

        boxes = page.locator("#candidates tbody input.pick")
        boxes.nth(0).check()
        boxes.nth(1).check()
        page.click("#compare")
        page.wait_for_selector("#result:not([hidden])", timeout=10_000)
        assert f"a={best}" in page.url
        assert page.locator("#diff pre.diff .add").count() >= 1
        assert page.locator("#splits .split-train tr.differs").count() >= 1
        assert page.locator("#differing .differ").count() >= 1
        assert "expected" in page.inner_text("#differing")
        _shot(page, "steering-compare.png", full_page=True)

        page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
        page.wait_for_selector("#phase.completed", timeout=20_000)
        child = next(c for c in _children(url, run_id) if c != best)
        page.click(f"#candidates tr[data-candidate='{child}']")
        page.click("#c-branch")
        page.fill("#ask-max_metric_calls", "60")
        page.uncheck("#ask-start")
        page.click("#ask-ok")
        page.wait_for_selector("#branched-from", timeout=10_000)
        assert f"branched from run {run_id}" in page.inner_text("#branched-from")
        branch = page.url.split("/runs/")[1].split("?")[0]
        made = httpx.get(f"{url}/api/runs/{branch}", headers=HEADERS).json()
        assert made["branch_of"] == {"run_id": run_id, "candidate_id": child}
        assert made["status"] == "created" and made["config"]["max_metric_calls"] == 60
        page.click("#branched-from a")
        page.wait_for_selector("#branches", timeout=10_000)
        assert branch in page.inner_text("#branches")
        _shot(page, "steering-branch.png")
        page.close()
    assert not errors, errors
