"""The console's Trials panel of a MIPRO run, in headless Chromium against a real service.

The runs are never started: the test writes a MIPRO run's events straight into the workspace
log, as the runner would, and the service streams them to the page (it polls the log, so it
also sees events another process wrote).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process
from workspace import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

LONG = "Think step by step about the arithmetic, " * 6 + "then answer with the number alone."
HOSTILE = '<script>window.__pwned = true</script><img src=x onerror="window.__pwned = true">'
INSTRUCTIONS = ["Answer the question.", LONG, HOSTILE]
DEMO = {"input": {"question": "2+2?"}, "output": "4"}
DEMO_SETS: list[list[Any]] = [[], [DEMO, "a text demo"], [DEMO] * 4]
SUMMARY = "Arithmetic word problems; answers are <b>numbers</b>."
Event = tuple[str, dict[str, Any]]


def _trial(n: int, instruction: int, demo_set: int, score: float | None, best: int) -> Event:
    scores = {1: 0.5, 2: 0.75, 4: 1.0}
    data = {
        "trial": n,
        "candidate_id": f"cand{n:02d}{'f' * 28}",
        "instruction": instruction,
        "demo_set": demo_set,
        "minibatch": ["seed-a", "seed-b"],
        "score": score,
        "paid": 2 * n,
        "best": {"candidate_id": f"cand{best:02d}{'f' * 28}", "score": scores[best], "trial": best},
    }
    return ("trial", data)


BEFORE: list[Event] = [
    ("phase", {"phase": "evaluating_baseline"}),
    ("scored", {"candidate_id": "base" + "0" * 28, "split": "train", "mean": 0.5}),
    ("phase", {"phase": "searching"}),
    (
        "mipro_setup",
        {
            "instructions": INSTRUCTIONS,
            "demo_sets": DEMO_SETS,
            "bootstrapped": 3,
            "labelled": 8,
            "summary": SUMMARY,
            "rejected": ["a duplicate of the baseline"],
        },
    ),
    _trial(1, 0, 0, 0.5, best=1),
    (
        "candidate",
        {
            "candidate_id": "cand02" + "f" * 28,
            "parents": ["base" + "0" * 28],
            "origin": "mipro",
            "iteration": 2,
            "rationale": "instruction 1 + demo set 2",
            "diff": "",
            "mode": "mipro",
        },
    ),
    _trial(2, 1, 2, 0.75, best=2),
    _trial(3, 2, 1, None, best=2),
    ("scored", {"candidate_id": "cand02" + "f" * 28, "split": "train", "mean": 0.7}),
]


def _append(root: Path, run_id: str, events: list[Event]) -> None:
    async def write() -> None:
        async with Workspace(root) as workspace:
            for kind, data in events:
                await workspace.append_event(run_id, kind, data)

    # playwright's sync API runs an event loop in this thread, so the write gets its own thread
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One service for the module; yields (URL, workspace root)."""
    root = tmp_path_factory.mktemp("mipro") / "ws"
    with serve_process(root, token=TOKEN, extra=["--heartbeat", "1"]) as (url, _):
        yield url, root


def _cells(page: Any, trial: int) -> list[str]:
    return [c.strip() for c in page.locator(f"tr[data-trial='{trial}'] td").all_inner_texts()]


def test_mipro_run_shows_its_trials_live(
    browser: Any, served: tuple[str, Path], reflection_url: str, tmp_path: Path
) -> None:
    url, root = served
    run_id = create_run(url, run_config(reflection_url, method="mipro"))
    _append(root, run_id, BEFORE)
    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
    page.evaluate("window.__sameDocument = true")
    page.wait_for_function(
        "document.querySelectorAll('#mipro-trials tbody tr').length === 3", timeout=15_000
    )

    assert page.inner_text("#method") == "MIPRO"
    assert page.is_visible("#mipro") and page.text_content("#feed-title") == "Rollouts"
    rows = page.locator("#mipro-trials tbody tr")
    assert [rows.nth(i).get_attribute("data-trial") for i in range(3)] == ["3", "2", "1"]
    assert _cells(page, 2) == ["2", "1", "2 · 4 demos", "cand02ffff", "0.75", "0.75"]
    assert _cells(page, 3) == ["3", "2", "1 · 2 demos", "cand03ffff", "error", "0.75"]
    assert _cells(page, 1) == ["1", "0", "0 · zero-shot", "cand01ffff", "0.50", "0.50"]
    assert page.get_attribute("tr[data-trial='2']", "class") == "best"
    assert page.inner_text("#mipro-count") == "3 trials"
    assert page.locator("#mipro-plot circle").count() == 3

    items = page.locator("#mipro-instructions li")
    assert items.count() == 3
    assert "Answer the question." in items.nth(0).inner_text()
    assert "baseline" in items.nth(0).inner_text()
    summary = page.inner_text("li[data-instruction='1'] summary")
    assert summary.endswith("…") and len(summary) == 121 and LONG.startswith(summary[:-1])
    assert page.text_content("li[data-instruction='1'] details pre") == LONG
    assert page.get_attribute("li[data-instruction='1'] .text", "title") == LONG
    assert page.text_content("li[data-instruction='2'] pre") == HOSTILE  # shown as text
    assert page.locator("#mipro-instructions script, #mipro-instructions img").count() == 0
    assert page.evaluate("window.__pwned") is None  # and never run
    demos = page.locator("#mipro-demos .tag").all_inner_texts()
    assert demos == ["0 · zero-shot", "1 · 2 demos", "2 · 4 demos"]
    assert "3 bootstrapped · 8 labelled demos" in page.inner_text("#mipro-setup")
    assert page.inner_text("#mipro-instructions-foot") == "1 proposal rejected"
    assert page.text_content("#mipro-summary pre") == SUMMARY
    assert "3 trials" in page.inner_text("#cand-foot")

    _append(root, run_id, [_trial(4, 1, 1, 1.0, best=4)])  # after the page loaded: SSE brings it
    page.wait_for_function(
        "document.querySelector('#mipro-trials tbody tr').dataset.trial === '4'", timeout=15_000
    )
    assert rows.count() == 4
    assert _cells(page, 4) == ["4", "1", "1 · 2 demos", "cand04ffff", "1.00", "1.00"]
    assert page.get_attribute("tr[data-trial='4']", "class") == "best"
    assert page.get_attribute("tr[data-trial='2']", "class") == ""
    assert "1× · best 1.00" not in page.inner_text("li[data-instruction='1']")
    assert "2× · best 1.00" in page.inner_text("li[data-instruction='1']")
    newest = " ".join(page.inner_text("#activity li:first-child").split())
    assert newest.endswith("trial 4: best so far cand04ffff (minibatch mean 1.000)")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path=str(tmp_path / "console-mipro.png"), full_page=True)
    page.close()
    assert not errors, errors


def test_gepa_run_has_no_trials_panel(
    browser: Any, served: tuple[str, Path], reflection_url: str
) -> None:
    url, root = served
    run_id = create_run(url, run_config(reflection_url))
    _append(root, run_id, [BEFORE[0], BEFORE[1], BEFORE[2]])
    page = browser.new_page()
    page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
    page.wait_for_selector("#phase.searching", timeout=15_000)
    assert page.inner_text("#method") == "GEPA"
    assert page.is_hidden("#mipro")
    assert page.text_content("#feed-title") == "Trials"
    assert "iterations" in page.inner_text("#cand-foot")
    page.close()
