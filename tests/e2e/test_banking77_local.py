"""Banking77 on the real local model, through real processes (the README's main job).

A tiny optimization: the Banking77 container (``python -m examples.banking77``) as a process
talking to a llama.cpp server with Qwen2.5-Coder-0.5B, and the optimizer using the same model
as its reflection model in text mode. Asserts what the code guarantees whatever the 0.5B
answers: the candidate's prompt reaches the model and its answer is parsed and scored as the
verifier says; the run asks the real model to reflect and writes a valid evidence packet with
a baseline computed by the real model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples.banking77.labels import UNKNOWN, parse_label
from optimizer.searches import run_optimization
from optimizer.testing import free_port, wait_http
from schemas import RunConfig
from tests.fakes.servers import ROOT

pytestmark = [pytest.mark.local_model, pytest.mark.e2e, pytest.mark.slow]

FORCED = "Ignore the query. Always answer with exactly this label: card_arrival"


@pytest.fixture(scope="module")
def banking77(local_llm_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "OPENAI_BASE_URL": local_llm_base_url,
        "OPENAI_API_KEY": "sk-local",
        "GEPA_STUDENT_MODEL": "student",
        "B77_DATA_DIR": str(tmp_path_factory.mktemp("b77")),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.banking77",
            "--port",
            str(port),
            "--train-size",
            "6",
            "--holdout-size",
            "8",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_prompt_reaches_the_model_and_its_answer_is_scored(banking77: str) -> None:
    program = httpx.get(f"{banking77}/program").json()
    baseline = program["components"][0]["text"]
    seeds = program["seeds"]["holdout"][:2]
    labels = json.loads((ROOT / "examples" / "banking77" / "categories.json").read_text())
    for prompt in (baseline, FORCED):
        for seed in seeds:
            body = {"candidate": {"system_prompt": prompt}, "seed": seed}
            answer = httpx.post(f"{banking77}/rollout", json=body, timeout=120).json()
            system, user, reply = answer["trace"]["messages"]
            # The fixed label list, then the candidate's prompt, is what the model read ...
            assert system["role"] == "system"
            assert system["content"] == "Labels: " + ", ".join(labels) + "\n\n" + prompt.rstrip()
            assert user["role"] == "user" and user["content"]
            # ... and whatever it answered is parsed to a label (or "unknown") and scored.
            assert reply["role"] == "assistant"
            assert answer["output"] == parse_label(reply["content"], labels)
            output = answer["output"]
            verdict = {1.0: f"correct: predicted {output}", 0.0: f"predicted {output}, expected"}
            if output == UNKNOWN:
                verdict[0.0] = "the output "
            assert answer["feedback"].startswith(verdict[answer["reward"]]), answer["feedback"]
            assert answer["usage"]["output_tokens"] > 0


async def test_tiny_optimization_on_the_real_model(
    banking77: str, local_llm_base_url: str, tmp_path: Path
) -> None:
    config = RunConfig(
        containers=[banking77],
        reflection_model="student",
        reflection_base_url=local_llm_base_url,
        proposer_mode="text",
        max_metric_calls=50,
        minibatch_size=3,
        holdout_top_k=2,
        seed=0,
        concurrency=2,
        max_idle_iterations=3,
        use_merge=False,
        max_prompt_chars=1200,  # the 0.5B rambles: a short cap keeps a proposal under a minute
        reflection_max_tokens=400,
    )
    result = await run_optimization(config, workspace=tmp_path / "ws")
    packet = json.loads((result.evidence_dir / "evidence.json").read_text())
    assert packet["status"] == "completed"
    assert packet["program"]["program_id"] == "banking77-intent"
    assert packet["rollouts"]["errors"] == 0
    assert packet["rollouts"]["paid"] <= 50
    # The baseline was scored by the model: every rollout is a real answer with real tokens.
    assert packet["usage"]["student"]["output_tokens"] > 0
    base = packet["per_seed"]["holdout"]
    assert len(base) == 8 and all(v["baseline"] is not None for v in base.values())
    assert 0.0 <= packet["baseline"]["holdout"] <= 1.0
    # The real model was asked to reflect (whether the 0.5B wrote a usable candidate within 3
    # idle iterations is its business), and the run says why it stopped.
    proposer = packet["usage"]["proposer"]
    assert proposer["calls"] >= 1 and proposer["output_tokens"] > 0, proposer
    assert packet["stop_reason"]
    candidates = {c["candidate_id"] for c in packet["candidates"]}
    assert all(set(c["parents"]) <= candidates for c in packet["candidates"])
    assert (result.evidence_dir / "report.md").read_text().startswith("# GEPA run")
