"""The console in headless Chromium: the new-run form plans a config, then creates the run.

The toy container and ``gepa-runtime serve`` are real processes; the plan's sample proposals go
to the scripted reflection model on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import toy_container
from tests.service.console import TOKEN
from tests.service.processes import serve_process

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

FIGURES = """() => Object.fromEntries([...document.querySelectorAll('#plan-result tr[data-figure]')]
    .map((tr) => [tr.dataset.figure, [tr.children[1].textContent, tr.children[2].textContent]]))"""


def test_the_new_run_form_shows_the_plan_then_creates_the_run(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    with (
        toy_container(tmp_path / "calls.log") as container,
        serve_process(tmp_path / "ws", token=TOKEN) as (url, _),
    ):
        page = browser.new_page(viewport={"width": 1440, "height": 1100})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/?token={TOKEN}")
        page.click("#newrun summary")
        page.fill("#newrun-form [name=containers]", container)
        page.fill("#newrun-form [name=reflection_model]", "fake-reflection")
        page.fill("#newrun-form [name=reflection_base_url]", reflection_url)
        page.fill("#newrun-form [name=max_metric_calls]", "200")
        page.fill("#newrun-form [name=max_cost_usd]", "1")
        page.click("#plan-button")
        page.wait_for_selector("#plan-result tr[data-figure=wall_s]", timeout=60_000)
        figures = page.evaluate(FIGURES)
        intro = page.inner_text("#plan-result p")
        calls_before = len((tmp_path / "calls.log").read_text().splitlines())
        runs_before = httpx.get(f"{url}/api/runs", params={"token": TOKEN}).json()["runs"]
        page.click("#create-button")
        page.wait_for_url("**/runs/run-*", timeout=20_000)
        run_id = page.url.split("/runs/")[1].split("?")[0]
        run = httpx.get(f"{url}/api/runs/{run_id}", params={"token": TOKEN}).json()
        page.close()
    assert not errors, errors
    assert "sample rollouts" in intro and "nothing stored" in intro
    assert figures["container_calls"][0] == "200", figures
    assert "the whole budget of 200 metric calls" in figures["container_calls"][1]
    assert figures["student_usd"][0].startswith("$")  # the toy container reports its cost
    assert figures["reflection_usd"][0] == "unknown"  # a model on this machine has no price
    assert "--prices" in figures["reflection_usd"][1]
    assert set(figures) >= {"reflection_calls", "student_tokens", "total_usd", "wall_s"}
    assert calls_before > 0  # the plan sent its sample rollouts to the container
    assert runs_before == []  # and stored nothing
    assert run["status"] == "created" and run["config"]["max_metric_calls"] == 200
    assert run["config"]["max_cost_usd"] == 1 and run["config"]["containers"] == [container]
