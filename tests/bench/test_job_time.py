"""``bench/job_time.py``: where a finished run's time went, read from its workspace.

A real run (the priced scripted container, whose rollouts report prompt tokens growing with
the prompt) in a real SQLite workspace, then the breakdown: its figures must agree with what
the workspace holds, and the overlap arithmetic with hand-made intervals.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from optimizer.searches import run_optimization
from schemas import RunConfig
from tests.fakes.priced import PricedContainer, detail_proposer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import job_time  # noqa: E402


def test_the_union_counts_overlapping_calls_once() -> None:
    assert job_time._union([(0, 2), (1, 3), (5, 6)]) == 4
    assert job_time._union([]) == 0
    assert job_time._overlap([(0, 2), (1, 3), (5, 6)], (1.5, 5.5)) == 2.0


async def test_the_breakdown_of_a_real_run_agrees_with_its_workspace(tmp_path: Path) -> None:
    settings = {
        "containers": ["http://priced"], "reflection_model": "scripted", "max_metric_calls": 200,
        "minibatch_size": 3, "max_idle_iterations": 4, "use_merge": False, "seed": 0,
    }  # fmt: skip
    async with PricedContainer().client() as http:
        result = await run_optimization(
            RunConfig(**settings), workspace=tmp_path, proposer=detail_proposer(), http=http
        )
    with sqlite3.connect(tmp_path / "workspace.sqlite") as conn:
        figures = job_time.breakdown(conn, job_time._run_id(conn, None))
        paid = conn.execute("SELECT COUNT(*) FROM trials WHERE cached = 0").fetchone()[0]
        written = conn.execute(
            "SELECT COUNT(*) FROM events WHERE type = 'candidate' "
            "AND json_extract(data, '$.origin') = 'mutation'"  # written by a proposal
        ).fetchone()
    assert figures["run_id"] == result.run_id
    student = figures["student"]
    assert student["paid_rollouts"] == paid > 0
    assert student["prompt_tokens"] > student["prompt_tokens_reusable"] > 0
    assert 0 < student["outstanding_s"] <= figures["wall_s"]
    assert figures["proposals"]["count"] == written[0] > 0
    assert set(figures["phases_s"]) >= {"evaluating_baseline", "searching"}
    assert sum(figures["phases_s"].values()) <= figures["wall_s"] + 1e-6
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "job_time.py"), str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"run {result.run_id}:" in done.stdout and "prefix cache could reuse" in done.stdout
    assert json.loads(out.read_text())["student"]["paid_rollouts"] == paid


def test_a_folder_without_a_workspace_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "job_time.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "no workspace at" in done.stderr
