"""A careless user's mistakes end clearly, before any budget is spent, never as retried faults.

Real ``gepa-runtime container`` processes on 127.0.0.1 serve the targets of
``fixtures/mistakes.py``; the optimizer's CLI runs ``dry-run`` and ``run`` against them with
the scripted reflection model. A dry-run fails with the container's message; a run stops at
the first refused rollout with that message (no seed is sent twice) instead of retrying it
and blaming the container's health.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.cli import main
from optimizer.testing import free_port, reflection_app, thread_server, wait_http
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e

MISTAKES = Path(__file__).parent / "fixtures" / "mistakes.py"
LABELS = ["cow", "cat", "dog"]


@contextlib.contextmanager
def _container(
    target: str, dataset: Path, log: Path, extra: list[str] | None = None
) -> Iterator[tuple[str, Path]]:
    """``gepa-runtime container`` serving one target of ``mistakes.py``; yields (URL, stderr)."""
    port = free_port()
    stderr = log.with_suffix(".stderr")
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "optimizer.cli",
                "container",
                f"{MISTAKES}:{target}",
                "--dataset",
                str(dataset),
                "--port",
                str(port),
                "--log-level",
                "warning",
                *(extra or []),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "MISTAKES_LOG": str(log)},
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
            yield f"http://127.0.0.1:{port}", stderr
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def reflection() -> Iterator[str]:
    """The scripted reflection model's base URL."""
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _rows(tmp_path: Path, make: str) -> Path:
    """Twelve rows: labelled, labelled in a column the SDK ignores, or template-shaped."""
    rows = []
    for i in range(12):
        label = LABELS[i % 3]
        if make == "labelled":
            rows.append({"id": f"r{i}", "text": f"item {i}", "label": label})
        elif make == "gold":
            rows.append({"id": f"r{i}", "text": f"item {i}", "gold": label})
        else:
            rows.append({"id": f"r{i}", "input": {"text": f"item {i}"}, "label": label})
    path = tmp_path / f"{make}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _flags(url: str, reflection: str) -> list[str]:
    return [
        "--container",
        url,
        "--reflection-model",
        "fake-reflection",
        "--reflection-base-url",
        reflection,
        "--max-metric-calls",
        "40",
    ]


@pytest.mark.parametrize(
    ("target", "rows", "kind", "message"),
    [
        ("int-answer", "labelled", "BadTargetResult", "returned int; return an AgentResult"),
        ("echo-label", "gold", "MissingLabel", "add an expected/label/answer value"),
        ("question-template", "template", "TemplateMismatch", "needs field(s) question"),
    ],
)
def test_a_deterministic_mistake_fails_the_dry_run_and_stops_the_run_with_its_fix(
    tmp_path: Path,
    reflection: str,
    capsys: pytest.CaptureFixture[str],
    target: str,
    rows: str,
    kind: str,
    message: str,
) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    with _container(target, _rows(tmp_path, rows), log) as (url, _):
        assert main(["optimize", "dry-run", *_flags(url, reflection)]) == 1
        dry = capsys.readouterr().out
        assert (
            f"FAIL  baseline rollout r0: POST {url}/rollout (seed 'r0') answered 422: {kind}" in dry
        )
        assert message in dry and "a run would stop at the first such rollout" in dry
        assert not root.exists(), "a dry-run makes no run and stores nothing"
        dry_calls = len(_calls(log))

        code = main(
            [
                "optimize",
                "run",
                *_flags(url, reflection),
                "--workspace",
                str(root),
                "--quiet",
                "--retry-base-delay",
                "0.01",
            ]
        )
        err = capsys.readouterr().err
    assert code == 1
    assert f"answered 422: {kind}: " in err and message in err
    assert "rate limits" not in err and "not healthy" not in err
    run_calls = _calls(log)[dry_calls:]
    assert len(run_calls) == len(set(run_calls)), "a refused rollout is never retried"
    if target == "question-template":
        assert not _calls(log), "a row the template cannot render never reaches the target"


def test_a_sound_program_passes_the_dry_run_with_two_unstored_baseline_rollouts(
    tmp_path: Path, reflection: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "calls.log"
    with _container("echo-label", _rows(tmp_path, "labelled"), log) as (url, stderr):
        assert main(["optimize", "dry-run", *_flags(url, reflection)]) == 0
        out = capsys.readouterr().out
        sampled = _calls(log)
        assert (
            main(["optimize", "dry-run", *_flags(url, reflection), "--sample-rollouts", "0"]) == 0
        )
        quiet = capsys.readouterr().out
    assert "dry-run of the flags (2 baseline rollout(s), not stored;" in out
    assert "ok    baseline rollouts: 2 of 2 train seeds scored: 1 (r" in out
    assert "all checks passed" in out and "warn" not in out
    assert len(sampled) == 2 and len(set(sampled)) == 2
    assert len(_calls(log)) == 2 and "baseline rollouts" not in quiet  # 0: none sent
    assert "warning" not in stderr.read_text()


def test_an_empty_holdout_is_warned_at_start_and_by_the_dry_run(
    tmp_path: Path, reflection: str, capsys: pytest.CaptureFixture[str]
) -> None:
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps({"train": [f"r{i}" for i in range(12)]}))
    data = _rows(tmp_path, "labelled")
    with _container("echo-label", data, tmp_path / "c.log", ["--splits-file", str(splits)]) as (
        url,
        stderr,
    ):
        assert main(["optimize", "dry-run", *_flags(url, reflection)]) == 1
        out = capsys.readouterr().out
        started = stderr.read_text()
    assert "warning: echo-label: the holdout split is empty" in started
    assert "warn  container warns: the holdout split is empty" in out
    assert "FAIL  holdout seeds: the program has no holdout seeds" in out


def test_a_crashing_target_fails_the_dry_run_and_a_rate_limited_one_is_a_warning(
    tmp_path: Path, reflection: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _rows(tmp_path, "labelled")
    with _container("crash", data, tmp_path / "crash.log") as (url, _):
        assert main(["optimize", "dry-run", *_flags(url, reflection)]) == 1
        crashed = capsys.readouterr().out
    with _container("busy", data, tmp_path / "busy.log") as (url, _):
        # The run's --rate-limit-wait stays at its 600 s default: a check does not wait that out.
        started = time.monotonic()
        assert main(["optimize", "dry-run", *_flags(url, reflection)]) == 0
        busy_s = time.monotonic() - started
        busy = capsys.readouterr().out
        busy_calls = _calls(tmp_path / "busy.log")
    assert (
        "FAIL  baseline rollout r0: rollout of seed 'r0' failed after 3 attempts: HTTP 500: KeyError"
        in crashed
    )
    assert "(also seeds r" in crashed and "the container's log has the traceback" in crashed
    assert (
        "warn  baseline rollout r0: the container answered only 429 for the check's 10 s wait "
        "(last: HTTP 429: Retryable: student model rate limited) (also seeds r" in busy
    )
    assert "waiting up to --rate-limit-wait" in busy and "all checks passed" in busy
    assert busy_s < 120, f"the dry-run waited {busy_s:.0f} s on the rate limit, not about 10"
    assert len(set(busy_calls)) == 2 and len(busy_calls) > 2, "429s are tried, then again"
