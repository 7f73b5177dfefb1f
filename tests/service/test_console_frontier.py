"""The console's frontier, in headless Chromium against a real service: a seed nobody solved is
a miss, coverage reads covered/total, and seeds set aside are named.

The run is never started: the test writes a GEPA run's events straight into the workspace log,
as the runner would (the runner's side is tests/optimizer/test_frontier_events.py).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process
from workspace import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

BASE, CHILD = "base" + "0" * 12, "child" + "1" * 11
EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("phase", {"phase": "evaluating_baseline"}),
    ("scored", {"candidate_id": BASE, "split": "train", "mean": 0.0}),
    ("phase", {"phase": "searching"}),
    ("scored", {"candidate_id": CHILD, "split": "train", "mean": 0.5}),
    (
        "frontier",
        {
            "winners": {"ant-0": [CHILD], "ant-1": [CHILD], "bee-0": [], "bee-1": []},
            "coverage": {CHILD: 0.5},
            "covered": 2,
            "seeds": 4,
            "new": [CHILD],
            "best": {"candidate_id": CHILD, "mean": 0.5},
        },
    ),
    (
        "seed_set_aside",
        {
            "seed": "cow-1",
            "candidates": [BASE, CHILD],
            "kind": "status",
            "error": "rollout of seed 'cow-1' failed after 2 attempts: HTTP 500: KeyError",
        },
    ),
]


def _append(root: Path, run_id: str, events: list[tuple[str, dict[str, Any]]]) -> None:
    async def write() -> None:
        async with Workspace(root) as workspace:
            for kind, data in events:
                await workspace.append_event(run_id, kind, data)

    # playwright's sync API runs an event loop in this thread, so the write gets its own thread
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


def test_unsolved_seeds_are_misses_coverage_is_covered_of_total_and_set_aside_seeds_named(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    with serve_process(root, token=TOKEN) as (url, _):
        run_id = create_run(url, run_config(reflection_url))
        _append(root, run_id, EVENTS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
        page.wait_for_selector("#frontier td.cell", timeout=15_000)
        coverage = " ".join(page.inner_text("#coverage").split())
        foot = page.inner_text("#coverage-foot")
        cells = page.evaluate(
            """() => [...document.querySelectorAll('#frontier td.cell')].map((td) =>
                ({cls: td.className, title: td.title}))"""
        )
        counts = page.locator("#frontier td.count").all_inner_texts()
        page.wait_for_selector("#set-aside:not([hidden])", timeout=15_000)
        aside = page.inner_text("#set-aside")
        last_error = page.get_attribute("#set-aside .seed", "title")
        activity = page.inner_text("#activity")
        page.close()
    assert not errors, errors
    assert coverage == "2/4 covered"
    assert "wins 50% of the train seeds" in foot
    assert [c["cls"] for c in cells] == ["cell win", "cell win", "cell miss", "cell miss"]
    assert cells[2]["title"] == "bee-0: a miss, no candidate solved it"
    assert counts == ["2/4"]
    assert aside.startswith("Set aside (1): cow-1")
    assert "failed for 2 different candidates; not asked again, never scored" in aside
    assert last_error == "rollout of seed 'cow-1' failed after 2 attempts: HTTP 500: KeyError"
    assert "seed cow-1 set aside" in activity
