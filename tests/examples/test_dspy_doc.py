"""The DSPy guide's example (``docs/wrap-dspy.md``), run as written.

The Python block is read from the page and executed with ``OPENAI_BASE_URL`` pointing at
the scripted DSPy student on 127.0.0.1 (LiteLLM reads it, as the ``openai`` client does);
only ``serve_program``'s blocking server is swapped for a real uvicorn server in a thread,
given exactly what the example passed. Its rollouts score as the example's metric says.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from optimizer.testing import thread_server
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e
pytest.importorskip("dspy")

import container.dspy  # noqa: E402 - after the extra is known to be there
from tests.fakes.dspy_student import create_app as student_app  # noqa: E402


def _python_block() -> str:
    text = (ROOT / "docs" / "wrap-dspy.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)[0]


def test_the_dspy_example_serves_its_program(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(container.dspy, "serve_program", lambda *a, **k: served.append((a, k)))
    with thread_server(student_app()) as student:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{student}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "local-no-key")
        exec(_python_block(), {"__name__": "serve_sounds"})  # noqa: S102 - the guide's code
        ((args, kwargs),) = served
        assert kwargs.pop("port") == 8100
        with thread_server(container.dspy.dspy_app(*args, **kwargs)) as url:
            program = httpx.get(f"{url}/program").json()
            baseline = {c["name"]: c["text"] for c in program["components"]}
            named = {**baseline, "guess": "Name the animal: cow, cat, dog."}
            scores = [
                httpx.post(f"{url}/rollout", json={"candidate": c, "seed": "train-0000"}, timeout=30).json()
                for c in (baseline, named)
            ]  # fmt: skip
    assert list(baseline) == ["guess", "answer"] and len(program["seeds"]["holdout"]) == 6
    assert scores[0]["reward"] == 0.0 and scores[0]["feedback"] == "expected cow"
    assert scores[1]["reward"] == 1.0 and scores[1]["output"] == {"answer": "cow"}
