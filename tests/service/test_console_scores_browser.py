"""The console in headless Chromium: each candidate's mean and best, and each trial's trace id.

The toy container is a real process exporting its rollout spans to a real OTLP/HTTP receiver
on 127.0.0.1, so the trace ids the page shows are ids a tracing backend received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import thread_server, toy_container
from optimizer.testing.toy import TOY_SPLITS
from tests.fakes.otlp_receiver import create_app as otlp_app
from tests.service.conftest import run_config
from tests.service.console import TOKEN, create_run
from tests.service.processes import serve_process

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def _expected_scores(url: str, run_id: str) -> dict[str, tuple[float, float]]:
    """(mean, best) of each candidate over its train trials, from the API's feed."""
    train = set(json.loads((TOY_SPLITS).read_text())["train"])
    page = httpx.get(
        f"{url}/api/runs/{run_id}/rollouts", params={"token": TOKEN, "limit": 1000}
    ).json()
    rewards: dict[str, dict[str, float]] = {}
    for trial in page["rollouts"]:
        if trial["status"] == "ok" and trial["seed"] in train:
            rewards.setdefault(trial["candidate_id"], {})[trial["seed"]] = trial["reward"]
    return {
        c: (sum(r.values()) / len(train), max(r.values()))
        for c, r in rewards.items()
        if len(r) == len(train)  # scored on the full train split
    }


def test_candidates_show_mean_and_best_and_trials_their_trace_id(
    browser: Any, tmp_path: Path, reflection_url: str
) -> None:
    receiver = otlp_app()
    with thread_server(receiver) as otlp:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with (
            toy_container(tmp_path / "calls.log", env=env) as container,
            serve_process(tmp_path / "ws", token=TOKEN) as (url, _),
        ):
            run_id = create_run(url, run_config(reflection_url, container=container))
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{url}/runs/{run_id}?token={TOKEN}")
            page.click("#start")
            page.wait_for_selector("#phase.completed", timeout=90_000)
            page.wait_for_function(
                "document.querySelectorAll('#feed .trial .traceid').length > 0", timeout=20_000
            )
            headers = page.locator("#candidates thead th").all_inner_texts()
            rows = page.evaluate(
                """() => [...document.querySelectorAll('#candidates tbody tr')].map((tr) => ({
                    id: tr.querySelector('.cid').title,
                    mean: tr.querySelector('td.mean').textContent,
                    best: tr.querySelector('td.top').textContent}))"""
            )
            shown_ids = page.evaluate(
                "[...document.querySelectorAll('#feed .trial .traceid')].map((e) => e.dataset.traceId)"
            )
            expected = _expected_scores(url, run_id)
            page.close()
    assert not errors, errors
    assert "Mean" in headers and "Best" in headers
    scored = {r["id"]: (r["mean"], r["best"]) for r in rows if r["mean"] != "–"}
    assert len(scored) >= 2 and set(scored) == set(expected)
    for candidate_id, (mean, best) in expected.items():
        assert scored[candidate_id] == (f"{mean:.2f}", f"{best:.2f}")
    # a rejected or unfinished candidate has no train mean, so no best either
    assert all(r["best"] == "–" for r in rows if r["mean"] == "–")
    exported = {s["trace_id"] for s in receiver.state.spans}
    assert shown_ids and set(shown_ids) <= exported
