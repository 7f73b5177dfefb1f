"""The student model's routing: provider prefixes on the container's side, and its env name."""

from __future__ import annotations

import pytest
import respx

from container import Candidate, Task
from container.chat import ChatTarget, student_from_env
from schemas import PromptTemplate, UserError
from tests.proposer.fakes import Script, completion

TEMPLATE = PromptTemplate(system_prompt="Answer.", user_template="{input}")


def _candidate(model: str | None) -> Candidate:
    template = TEMPLATE
    return Candidate(components=template.to_components(), model=model, template_=template)


async def _ask(target: ChatTarget, model: str | None) -> None:
    await target(Task(name="t", input="2+2?", expected="4"), _candidate(model))


async def test_policy_models_are_routed_by_prefix(monkeypatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-student")
    local, routed = Script(completion("4"), completion("4")), Script(completion("4"))
    target = ChatTarget(model="openai/student", base_url="http://127.0.0.1:8012/v1")
    with respx.mock(assert_all_called=True) as router:
        router.post("http://127.0.0.1:8012/v1/chat/completions").mock(side_effect=local)
        router.post("https://openrouter.ai/api/v1/chat/completions").mock(side_effect=routed)
        await _ask(target, None)  # the container's own model
        await _ask(target, "openai/gpt-4.1-mini")  # a policy: the same endpoint, no prefix
        await _ask(target, "openrouter/meta/llama-3-8b")  # a policy for OpenRouter
        await target.aclose()
    assert [r["model"] for r in local.requests] == ["student", "gpt-4.1-mini"]
    assert routed.requests[0]["model"] == "meta/llama-3-8b"
    assert routed.raw[0].headers["authorization"] == "Bearer sk-or-student"


async def test_an_ollama_policy_goes_to_ollama_not_to_the_containers_base_url() -> None:
    ollama = Script(completion("4"))
    target = ChatTarget(model="student", base_url="http://127.0.0.1:8012/v1")
    with respx.mock(assert_all_called=True) as router:
        router.post("http://localhost:11434/v1/chat/completions").mock(side_effect=ollama)
        await _ask(target, "ollama/llama3")
        await target.aclose()
    assert ollama.requests[0]["model"] == "llama3"


async def test_a_missing_openrouter_key_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    target = ChatTarget(model="student", base_url="http://127.0.0.1:8012/v1")
    with pytest.raises(UserError, match=r"\$OPENROUTER_API_KEY"):
        await _ask(target, "openrouter/meta/llama-3-8b")
    await target.aclose()


def test_student_model_env_one_name_with_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    assert student_from_env({"GEPA_STUDENT_MODEL": "m1"}).model == "m1"
    assert student_from_env({"ROLLOUT_GEPA_STUDENT_MODEL": "openai/m2"}).model == "openai/m2"
    assert capsys.readouterr().err == ""
    assert student_from_env({"GEPA_TASK_MODEL": "m3"}).model == "m3"
    assert "GEPA_TASK_MODEL is deprecated: set GEPA_STUDENT_MODEL" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"GEPA_STUDENT_MODEL='a', GEPA_TASK_MODEL='b'"):
        student_from_env({"GEPA_STUDENT_MODEL": "a", "GEPA_TASK_MODEL": "b"})
