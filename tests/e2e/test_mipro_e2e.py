"""End-to-end: ``gepa-runtime optimize run --method mipro`` against a real container process.

The container is ``tests/fakes/toy_template_container.py`` (a template target: components
``system_prompt`` and ``demos``) served by ``gepa-runtime container``; the reflection model is
the scripted OpenAI-compatible server, which also answers MIPRO's summary and instruction
requests. Both commands run as real processes on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from optimizer.testing.toy import TOY_SPLITS
from tests.e2e.test_optimize_e2e import _assert_valid_packet
from tests.fakes.servers import FAKES, ROOT

pytestmark = pytest.mark.e2e


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "optimize", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _flags(container: str, reflection: str, root: Path) -> list[str]:
    return [
        "--method",
        "mipro",
        "--container",
        container,
        "--reflection-model",
        "fake-reflection",
        "--reflection-base-url",
        reflection,
        "--max-metric-calls",
        "260",
        "--minibatch-size",
        "4",
        "--num-instructions",
        "4",
        "--num-demo-sets",
        "5",
        "--max-demos",
        "4",
        "--seed",
        "2",
        "--workspace",
        str(root),
    ]


def _packet(root: Path) -> dict[str, Any]:
    folders = sorted((root / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return _assert_valid_packet(folders[-1])


def test_mipro_run_writes_a_packet_whose_best_template_carries_demos(tmp_path: Path) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    extra = ["--splits-file", str(TOY_SPLITS)]
    with (
        thread_server(reflection_app()) as reflection,
        toy_container(log, extra=extra, module=FAKES / "toy_template_container.py") as url,
    ):
        flags = _flags(url, f"{reflection}/v1", root)
        dry = _cli("dry-run", *flags)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "mipro: instructions in 'system_prompt', demos in 'demos'" in dry.stdout
        sampled = len(rollout_calls(log))  # the dry-run's baseline rollouts, stored nowhere
        assert sampled == 2 and not root.exists(), "a dry-run samples 2 rollouts, makes no run"

        first = _cli("run", *flags, "--quiet")
        assert first.returncode == 0, first.stdout + first.stderr
        packet = _packet(root)
        first_calls = rollout_calls(log)[sampled:]
        calls = len(first_calls)

        again = _cli("run", *flags, "--quiet")
        assert again.returncode == 0, again.stdout + again.stderr
        repeat = _packet(root)
    assert packet["method"] == "mipro" and packet["status"] == "completed"
    best = packet["best"]
    demos = json.loads(best["components"]["demos"])
    assert demos and all(set(d) == {"input", "output"} for d in demos)
    assert best["holdout"] > packet["baseline"]["holdout"] and packet["promotion"]["promoted"]
    mipro = packet["mipro"]
    assert len(mipro["instructions"]) >= 2 and mipro["instructions"][0] == "Answer with the label."
    assert mipro["best_params"]["demo_set"] > 0
    assert packet["rollouts"]["paid"] == calls <= 260
    report = (root / "runs" / packet["run_id"] / "report.md").read_text()
    assert report.startswith("# MIPRO run") and "## MIPRO search" in report
    # The same run again replays the same trials from the cache and pays for none of them;
    # cache hits are free, so it has budget left to go on with trials of its own.
    later = rollout_calls(log)[sampled + calls :]
    assert not set(later) & set(first_calls), "a cached (candidate, seed) reached the container"
    assert repeat["run_id"] != packet["run_id"]
    replayed = repeat["mipro"]["trials"][: len(mipro["trials"])]
    assert replayed == [{**t, "paid": 0} for t in mipro["trials"]]
    assert repeat["rollouts"]["paid"] == len(later)
    assert repeat["rollouts"]["cached"] >= packet["rollouts"]["paid"]
