"""A DSPy program on the real local student (Qwen2.5-Coder 0.5B), optimized and reloaded.

The program has two predictors (``classify`` a review's sentiment, ``answer`` with one word)
and runs through its own ``dspy.LM`` on the llama.cpp server of ``local_llm_base_url``, at
temperature 0; ``container.dspy`` serves it on a real uvicorn server; ``gepa-runtime optimize
run`` optimizes it with a scripted reflection model that rewrites ``classify``. The best
candidate is exported with ``runs export --dspy``, loaded into a fresh program with
``program.load``, and scores on holdout what the optimizer measured for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from optimizer.testing import thread_server
from tests.fakes.servers import ROOT

pytestmark = [pytest.mark.local_model, pytest.mark.e2e, pytest.mark.slow]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
dspy = pytest.importorskip("dspy")

from container.dspy import dspy_app  # noqa: E402 - after the extra is known to be there

REVIEWS = [
    ("I loved every minute of it, wonderful film.", "positive"),
    ("Terrible plot and awful acting, a waste of time.", "negative"),
    ("A delightful, heartwarming story.", "positive"),
    ("Boring and far too long, I hated it.", "negative"),
    ("Brilliant performances, I would watch it again.", "positive"),
    ("The worst movie I have seen this year.", "negative"),
    ("Great fun from start to finish.", "positive"),
    ("Dull, predictable and badly written.", "negative"),
    ("An excellent and moving film.", "positive"),
    ("I was disappointed, it was bad.", "negative"),
]
BETTER = (
    "Read the movie review and decide its sentiment. Reply with exactly one lowercase word: "
    "positive if the reviewer liked the film, negative if they did not."
)


class Classify(dspy.Signature):
    """Say how the review feels."""

    review: str = dspy.InputField()
    sentiment: str = dspy.OutputField()


class Answer(dspy.Signature):
    """Answer with one word, positive or negative."""

    review: str = dspy.InputField()
    sentiment: str = dspy.InputField()
    label: str = dspy.OutputField()


class Sentiment(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.classify = dspy.Predict(Classify)
        self.answer = dspy.Predict(Answer)

    def forward(self, review: str) -> Any:
        sentiment = self.classify(review=review).sentiment
        return self.answer(review=review, sentiment=sentiment)


def metric(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    said = str(getattr(pred, "label", "")).strip().lower()
    ok = said.startswith(gold.label)
    return dspy.Prediction(
        score=float(ok), feedback="correct" if ok else f"said {said!r}, expected {gold.label}"
    )


def _examples(rows: list[tuple[str, str]]) -> list[Any]:
    return [dspy.Example(review=r, label=label).with_inputs("review") for r, label in rows]


def reflection() -> Starlette:
    """A reflection model that always proposes the clearer instructions for ``classify``."""

    async def completions(request: Request) -> JSONResponse:
        text = f"<<<COMPONENT classify\n{BETTER}\n>>>\nRATIONALE: say which words to answer with"
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": text},
        }
        return JSONResponse(
            {"id": "r", "object": "chat.completion", "model": "m", "choices": [choice], "usage": {}}
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env=dict(os.environ),
    )  # fmt: skip


def test_a_dspy_program_on_the_local_student(tmp_path: Path, local_llm_base_url: str) -> None:
    lm = dspy.LM("openai/student", api_base=local_llm_base_url, api_key="local", temperature=0.0, max_tokens=64, cache=False)  # fmt: skip
    train, holdout = _examples(REVIEWS[:6]), _examples(REVIEWS[6:])
    app = dspy_app(Sentiment(), trainset=train, metric=metric, holdout=holdout, lm=lm)
    with thread_server(app) as container, thread_server(reflection()) as model:
        program = httpx.get(f"{container}/program").json()
        body = {
            "candidate": {c["name"]: c["text"] for c in program["components"]},
            "seed": "train-0000",
        }
        rollout = httpx.post(f"{container}/rollout", json=body, timeout=300).json()
        done = _cli(
            "optimize", "run", "--quiet", "--workspace", str(tmp_path / "ws"),
            "--container", container, "--max-metric-calls", "24", "--concurrency", "1",
            "--reflection-model", "reflection", "--reflection-base-url", f"{model}/v1",
            "--proposer-mode", "text", "--rollout-timeout", "300",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(_cli("runs", "list", "--json", "--workspace", str(tmp_path / "ws")).stdout)
    packet = json.loads((tmp_path / "ws" / "runs" / run["run_id"] / "evidence.json").read_text())
    assert packet["rollouts"]["errors"] == 0
    # the trace is the program's two calls to the real model, with its answers
    messages = rollout["trace"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"] * 2
    assert "sentiment" in messages[2]["content"] and rollout["usage"]["input_tokens"] > 0
    assert "label" in rollout["output"] or "parse_error" in rollout["output"]
    saved = tmp_path / "best.json"
    exported = _cli("runs", "export", run["run_id"], "--dspy", str(saved), "--workspace", str(tmp_path / "ws"))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    reloaded = Sentiment()
    reloaded.load(str(saved))
    assert reloaded.classify.signature.instructions == packet["best"]["components"]["classify"]
    with dspy.context(lm=lm):
        scores = [metric(ex, reloaded(**ex.inputs())).score for ex in holdout]
    assert sum(scores) / len(scores) == pytest.approx(packet["best"]["holdout"])
