"""``gepa-runtime check`` on the Banking77 container and the local 0.5B model (the main job's task).

A small run of the main job's task design (the card intents, rule-mode proposals, the local
model as student and as reflection model) through the CLI, then:

- its best against its baseline is checked again: the evidence packet's lift and interval, to
  the last digit, with no new rollout (the container counts none: every answer is cached);
- a damaged prompt that takes the label list away from the model (it is told to ignore it)
  against the best: worse, exit 1;
- a usage error: exit 2 with a message that names the fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.banking77.design import DESIGN
from optimizer.testing import free_port, wait_http
from tests.fakes.servers import ROOT

pytestmark = [pytest.mark.local_model, pytest.mark.e2e, pytest.mark.slow]

GEPA = [sys.executable, "-m", "optimizer.cli"]
DAMAGED = (
    "Ignore the label list above. Describe the customer's problem in one full sentence of "
    "your own words."
)
TRAIN, HOLDOUT, BUDGET = 12, 30, 130


@pytest.fixture(scope="module")
def banking77(local_llm_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The main job's container (card intents, splits drawn by seed 0), smaller splits."""
    port = free_port()
    env = {
        **os.environ,
        "OPENAI_BASE_URL": local_llm_base_url,
        "OPENAI_API_KEY": "sk-local",
        "GEPA_STUDENT_MODEL": "student",
        "B77_DATA_DIR": str(tmp_path_factory.mktemp("b77")),
    }
    args = DESIGN.container_args(seed=0)
    for flag, value in (("--train-size", TRAIN), ("--holdout-size", HOLDOUT)):
        args[args.index(flag) + 1] = str(value)
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.banking77", "--port", str(port), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc, timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _gepa(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GEPA, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800
    )


def test_the_main_jobs_best_is_checked_from_the_cache_and_a_damaged_prompt_fails(
    banking77: str, local_llm_base_url: str, tmp_path: Path
) -> None:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("GEPA_")}
    env = {**keep, "OPENAI_API_KEY": "sk-local", "GEPA_STUDENT_MODEL": "student"}
    flags = [*DESIGN.local_args(), "--minibatch-size", "4", "--concurrency", "2"]
    run = _gepa(
        "optimize", "run", "--quiet", "--container", banking77,
        "--reflection-model", "student", "--reflection-base-url", local_llm_base_url,
        "--proposer-mode", DESIGN.proposer_mode, *flags,
        "--max-metric-calls", str(BUDGET), "--seed", "0", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_id = next(
        line.split()[-1] for line in run.stdout.splitlines() if line.startswith("run id:")
    )
    packet = json.loads((tmp_path / ".gepa" / "runs" / run_id / "evidence.json").read_text())
    promotion = packet["promotion"]
    assert promotion["measured_on"] == "holdout" and promotion["n"] >= HOLDOUT - 2

    check = _gepa("check", "--run", run_id, "--report-json", "check.json", cwd=tmp_path, env=env)
    report = json.loads((tmp_path / "check.json").read_text())
    verdict = report["verdict"]
    # The packet's lift and interval, from the cache: no rollout was paid.
    assert [verdict[k] for k in ("lift", "ci_low", "ci_high", "n")] == [
        promotion[k] for k in ("lift", "ci_low", "ci_high", "n")
    ], (verdict, promotion)
    assert report["rollouts"]["paid"] == 0 and report["rollouts"]["errors"] == 0
    assert check.returncode == 0, check.stdout + check.stderr  # not worse than its baseline

    (tmp_path / "damaged.txt").write_text(DAMAGED + "\n")
    damaged = _gepa(
        "check", "--run", run_id, "--candidate", "damaged.txt", "--reference", "best",
        "--report-md", "damaged.md", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    assert (tmp_path / "damaged.md").read_text().startswith("### gepa-runtime check: FAILED")

    usage = _gepa("check", "--run", run_id, "--candidate", "damaged.md.txt", cwd=tmp_path, env=env)
    assert usage.returncode == 2
    assert "damaged.md.txt" in usage.stderr and "fix the path" not in usage.stderr
    assert "no file, candidate id or side a check knows: name `baseline`" in usage.stderr
