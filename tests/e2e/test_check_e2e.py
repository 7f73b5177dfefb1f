"""``gepa-runtime check`` end to end: a real toy container process, the CLI, exit codes.

The toy agent answers an item's label only when the prompt names it; the scripted reflection
model adds two labels per proposal, so a small budget ends on a best that names some of them:
a lift with a real interval. ``$TOY_LOG`` counts the rollouts the container served.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from tests.fakes.servers import fake_reflection_flags

pytestmark = pytest.mark.e2e

GEPA = [sys.executable, "-m", "optimizer.cli"]


@pytest.fixture(scope="module")
def reflection() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _gepa(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEPA_")}
    return subprocess.run(
        [*GEPA, *args], cwd=cwd, env={**env, "OPENAI_API_KEY": "sk-test"}, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def test_a_runs_best_is_checked_again_from_the_cache_and_a_damaged_prompt_fails(
    tmp_path: Path, reflection: str
) -> None:
    log = tmp_path / "calls.log"
    with toy_container(log) as url:
        run = _gepa(
            "optimize", "run", "--quiet", "--container", url, "--seed", "4",
            "--minibatch-size", "4", "--use-merge", "false",
            *fake_reflection_flags(reflection, 110), cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        run_id = next(
            line.split()[-1] for line in run.stdout.splitlines() if line.startswith("run id:")
        )
        packet = json.loads(next(tmp_path.glob(".gepa/runs/*/evidence.json")).read_text())
        promotion = packet["promotion"]
        assert promotion["ci_low"] < promotion["ci_high"]  # a real interval to reproduce
        paid = len(rollout_calls(log))

        # The run's best against its baseline, on the container as it is now: the packet's
        # lift and interval, to the last digit, from the cache.
        check = _gepa(
            "check", "--run", run_id, "--report-md", "check.md", "--report-json", "check.json",
            cwd=tmp_path,
        )  # fmt: skip
        assert check.returncode == 0, check.stderr
        assert len(rollout_calls(log)) == paid
        report = json.loads((tmp_path / "check.json").read_text())
        verdict = report["verdict"]
        assert [verdict[k] for k in ("lift", "ci_low", "ci_high", "n")] == [
            promotion[k] for k in ("lift", "ci_low", "ci_high", "n")
        ]
        assert report["rollouts"] == {"paid": 0, "cached": 2 * promotion["n"], "errors": 0}
        assert report["run"]["drift"] == 0.0 and report["passed"] is True
        assert check.stdout.startswith("PASSED: candidate " + packet["best"]["candidate_id"])
        assert (tmp_path / "check.md").read_text().startswith("### gepa-runtime check: PASSED")

        # The winner exported as the app's prompt file and checked as a file: nothing paid.
        export = _gepa("runs", "export", run_id, "--prompt-file", "prompt.txt", cwd=tmp_path)
        assert export.returncode == 0, export.stderr
        text = (tmp_path / "prompt.txt").read_text()
        assert text == packet["best"]["components"]["system_prompt"] + "\n"
        again = _gepa("check", "--container", url, "--candidate", "prompt.txt", cwd=tmp_path)
        assert again.returncode == 0 and "0 paid" in again.stdout, again.stdout + again.stderr

        # The label list removed: worse than the best, exit 1.
        (tmp_path / "damaged.txt").write_text("Answer with the label.\n")
        damaged = _gepa(
            "check", "--run", run_id, "--candidate", "damaged.txt", "--reference", "best",
            "--report-md", "damaged.md", cwd=tmp_path,
        )  # fmt: skip
        assert damaged.returncode == 1, damaged.stdout + damaged.stderr
        assert damaged.stdout.startswith("FAILED:")
        assert "worse than the reference by more than 0" in (tmp_path / "damaged.md").read_text()


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--candidate", "sytem.txt"], "is no file, candidate id or side a check knows"),
        (["--candidate", "baseline", "--margin", "-0.1"], "give a number of 0 or more"),
        (["--candidate", "baseline", "--run", "run-nope"], "run-nope"),
        (["--candidate", "baseline", "--split", "val"], "has no val seeds"),
        (
            ["--candidate", "baseline", "--report-md", "no/such/folder/c.md"],
            "name a file in an existing",
        ),
    ],
)
def test_a_usage_error_exits_2_with_the_fix(tmp_path: Path, args: list[str], fix: str) -> None:
    with toy_container(tmp_path / "calls.log") as url:
        result = _gepa("check", "--container", url, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and fix in result.stderr


def test_a_container_that_is_down_is_a_usage_error(tmp_path: Path) -> None:
    from optimizer.testing import free_port

    result = _gepa(
        "check",
        "--container",
        f"http://127.0.0.1:{free_port()}",
        "--candidate",
        "baseline",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "fix --container" in result.stderr, result.stderr
