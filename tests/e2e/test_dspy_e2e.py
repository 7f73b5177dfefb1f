"""A DSPy program optimized end to end, exported with DSPy's save, reloaded and scored.

The program (:mod:`tests.fakes.dspy_program`, two predictors) runs on a scripted
OpenAI-compatible student on 127.0.0.1 through its own ``dspy.LM``; it is served as a task
container by ``container.dspy`` on a real uvicorn server, optimized by ``gepa-runtime optimize
run`` (a real process) with a scripted reflection model, exported with ``runs export --dspy``
and loaded back with ``program.load``: the reloaded program scores on holdout what the
optimizer measured for the best candidate.
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

from optimizer.testing import free_port, scripted_answer, thread_server, wait_http
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e
dspy = pytest.importorskip("dspy")

from container.dspy import dspy_app  # noqa: E402 - after the extra is known to be there
from tests.fakes import dspy_program  # noqa: E402
from tests.fakes.dspy_student import create_app as student_app  # noqa: E402


def reflection_for(component: str) -> Starlette:
    """The scripted reflection model of the toy runs, writing ``component``'s text."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        text = scripted_answer(body["messages"]).replace(
            "<<<COMPONENT system_prompt", f"<<<COMPONENT {component}"
        )
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": text},
        }
        return JSONResponse(
            {"id": "r", "object": "chat.completion", "model": "m", "choices": [choice], "usage": {}}
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip


def _score(program: Any, lm: Any, examples: list[Any]) -> float:
    with dspy.context(lm=lm):
        scores = [dspy_program.metric(ex, program(**ex.inputs())).score for ex in examples]
    return sum(scores) / len(scores)


def test_a_dspy_program_optimized_exported_and_reloaded(tmp_path: Path) -> None:
    student = student_app()
    with (
        thread_server(student) as student_url,
        thread_server(reflection_for("guess")) as reflection,
    ):
        lm = dspy.LM("openai/student", api_base=f"{student_url}/v1", api_key="local", cache=False)
        train, holdout = (
            dspy_program.examples(dspy_program.TRAIN),
            dspy_program.examples(dspy_program.HOLDOUT),
        )
        app = dspy_app(
            dspy_program.SoundProgram(),
            trainset=train,
            metric=dspy_program.metric,
            holdout=holdout,
            lm=lm,
        )
        with thread_server(app) as container:
            program = httpx.get(f"{container}/program").json()
            assert [c["name"] for c in program["components"]] == ["guess", "answer"]
            assert program["components"][0]["text"] == "Name the animal that makes the sound."
            assert len(program["seeds"]["train"]) == 6 and len(program["seeds"]["holdout"]) == 6
            rollout = httpx.post(
                f"{container}/rollout",
                json={"candidate": {c["name"]: c["text"] for c in program["components"]},
                      "seed": "train-0000", "return_trace": True},
            ).json()  # fmt: skip
            done = _cli(
                "optimize", "run", "--quiet", "--workspace", str(tmp_path / "ws"),
                "--container", container, "--max-metric-calls", "60",
                "--reflection-model", "reflection", "--reflection-base-url", f"{reflection}/v1",
                "--proposer-mode", "text",
            )  # fmt: skip
        assert done.returncode == 0, done.stderr
        # a GEPA-style metric's score and feedback; the trace is the program's two LM calls
        assert rollout["reward"] == 0.0 and rollout["feedback"] == "predicted unknown, expected cow"
        assert rollout["output"] == {"answer": "unknown"}
        roles = [m["role"] for m in rollout["trace"]["messages"]]
        assert roles == ["system", "user", "assistant", "system", "user", "assistant"]
        assert "[[ ## label ## ]]" in rollout["trace"]["messages"][2]["content"]
        assert rollout["usage"]["input_tokens"] == 100 and rollout["usage"]["output_tokens"] == 10
        (run,) = json.loads(
            _cli("runs", "list", "--json", "--workspace", str(tmp_path / "ws")).stdout
        )
        run_id = run["run_id"]
        packet = json.loads((tmp_path / "ws" / "runs" / run_id / "evidence.json").read_text())
        assert packet["baseline"]["holdout"] == 0.0 and packet["best"]["holdout"] == 1.0
        saved = tmp_path / "optimized.json"
        exported = _cli(
            "runs", "export", run_id, "--dspy", str(saved), "--workspace", str(tmp_path / "ws")
        )
        assert exported.returncode == 0, exported.stderr
        reloaded = dspy_program.SoundProgram()
        reloaded.load(str(saved))
        assert reloaded.guess.signature.instructions == packet["best"]["components"]["guess"]
        assert _score(dspy_program.SoundProgram(), lm, holdout) == packet["baseline"]["holdout"]
        assert _score(reloaded, lm, holdout) == packet["best"]["holdout"]


def test_the_container_command_serves_a_dspy_program(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in dspy_program.rows()))
    splits = tmp_path / "splits.json"
    names = [r["name"] for r in dspy_program.rows()]
    splits.write_text(json.dumps({"train": names[:6], "holdout": names[6:]}))
    with thread_server(student_app()) as student_url:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "optimizer.cli", "container",
             "--dspy", "tests.fakes.dspy_program:program", "--metric", "tests.fakes.dspy_program:metric",
             "--dataset", str(rows), "--splits-file", str(splits), "--port", str(port)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, "DSPY_STUDENT_BASE": f"{student_url}/v1"},
        )  # fmt: skip
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc=proc, timeout=60)
            program = httpx.get(f"http://127.0.0.1:{port}/program").json()
            body = {"candidate": {"guess": "Name the animal: cow or dog.", "answer": "Repeat it."},
                    "seed": "train-cow", "policy": {"model": "openai/student"}}  # fmt: skip
            scored = httpx.post(f"http://127.0.0.1:{port}/rollout", json=body, timeout=30).json()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
    assert program["program_id"] == "program" and program["seeds"]["holdout"] == names[6:]
    assert scored["reward"] == 1.0 and scored["output"] == {"answer": "cow"}
