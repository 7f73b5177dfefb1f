"""The console in headless Chromium: the run page's chart of reward against cost, its frontier.

A whole run on the container where longer prompts score a little higher and cost more per
call (``tests/fakes/priced.py``) is made in-process; a real ``gepa-runtime serve`` process then
serves its workspace, and the page of the run draws each candidate from its evidence packet.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from optimizer.searches import run_optimization
from schemas import RunConfig
from tests.fakes.priced import PricedContainer, detail_proposer
from tests.service.console import TOKEN
from tests.service.processes import serve_process

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

POINTS = """(axis) => [...document.querySelectorAll(`#objectives svg[data-axis=${axis}] .point`)]
    .map((p) => ({id: p.dataset.candidate, frontier: p.dataset.frontier === "true",
                  winner: p.classList.contains("winner"), baseline: p.classList.contains("baseline")}))"""


async def _priced_run(root: Path) -> dict[str, Any]:
    config = RunConfig(
        containers=["http://priced"],
        reflection_model="scripted",
        max_metric_calls=400,
        minibatch_size=3,
        max_idle_iterations=4,
        use_merge=False,
        proposals_in_flight=1,
        select="cheapest-within:0.02",
    )
    async with PricedContainer().client() as http:
        result = await run_optimization(
            config, workspace=root, proposer=detail_proposer(), http=http
        )
    return result.evidence


def test_the_run_page_charts_reward_against_cost_with_the_frontier(
    browser: Any, tmp_path: Path
) -> None:
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        packet = pool.submit(asyncio.run, _priced_run(tmp_path / "ws")).result()
    section = packet["objectives"]
    with serve_process(tmp_path / "ws", token=TOKEN) as (url, _):
        page = browser.new_page(viewport={"width": 1440, "height": 1200})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/runs/{packet['run_id']}?token={TOKEN}")
        page.wait_for_selector("#objectives svg[data-axis=cost_usd] .point", timeout=30_000)
        cost = page.evaluate(POINTS, "cost_usd")
        aside = page.inner_text("#objectives .aside")
        page.click("#objectives .tab[data-axis=prompt_tokens]")
        page.wait_for_selector("#objectives svg[data-axis=prompt_tokens]", timeout=5_000)
        tokens = page.evaluate(POINTS, "prompt_tokens")
        page.close()
    assert not errors, errors
    # one dot per candidate scored on train; the frontier's dots are the packet's frontier
    assert sorted(p["id"] for p in cost) == sorted(c["candidate_id"] for c in section["candidates"])
    assert {p["id"] for p in cost if p["frontier"]} == set(section["frontier"]["cost_usd"])
    assert any(not p["frontier"] for p in cost) or len(cost) == len(section["frontier"]["cost_usd"])
    winner = [p["id"] for p in cost if p["winner"]]
    assert winner == [packet["best"]["candidate_id"]]
    assert [p["id"] for p in cost if p["baseline"]] == [packet["baseline"]["candidate_id"]]
    assert "cheapest-within:0.02" in aside and "gives up 0.020 of reward" in aside
    assert {p["id"] for p in tokens if p["frontier"]} == set(section["frontier"]["prompt_tokens"])
