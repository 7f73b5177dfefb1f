"""The reflection client over its transport (``transport.chat_http``): retries and error
shapes as the openai client's, and the Azure client's errors mapped the same way."""

from __future__ import annotations

import httpx
import pytest

from optimizer.testing import thread_server
from proposer import ModelClient, ProposerConfig
from schemas import ProposerError, UserError
from tests.proposer.fakes import completion, config, scripted
from tests.proposer.test_providers import KEY, Recorder, _clean

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_the_server_saying_no_retry_is_obeyed(api) -> None:
    busy = httpx.Response(
        503, json={"error": {"message": "busy"}}, headers={"x-should-retry": "false"}
    )
    script = scripted(api, busy, completion("never asked"))
    with pytest.raises(ProposerError, match="HTTP 503"):
        await ModelClient(config(max_retries=3)).chat(MESSAGES)
    assert len(script.requests) == 1


async def test_a_dropped_connection_is_retried(api) -> None:
    answers = iter([httpx.ConnectError("refused"), httpx.Response(200, json=completion("back"))])

    def side_effect(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    api.post("/chat/completions").mock(side_effect=side_effect)
    reply = await ModelClient(config(max_retries=1)).chat(MESSAGES)
    assert reply.content == "back"


async def test_nobody_listening_is_a_proposer_error_naming_it() -> None:
    client = ModelClient(config())  # 127.0.0.1:9, no respx here: the connection is refused
    with pytest.raises(ProposerError, match="cannot reach the reflection model"):
        await client.chat(MESSAGES)
    await client.aclose()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (httpx.Response(200, text="<html>gateway</html>"), "unusable: the answer is not JSON"),
        (httpx.Response(200, json=[1, 2]), "unusable: the answer is not a JSON object"),
        (httpx.Response(200, json={"error": {"message": "overloaded"}}), "unusable: overloaded"),
        (httpx.Response(200, json={"choices": []}), "returned no choices"),
    ],
)
async def test_a_200_that_is_no_completion_is_a_proposer_error(api, answer, expected) -> None:
    scripted(api, answer)
    with pytest.raises(ProposerError, match=expected):
        await ModelClient(config()).chat(MESSAGES)


async def test_tool_calls_and_finish_reason_are_read(api) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"a": 1}'}}
    scripted(api, completion(None, tool_calls=[call], finish_reason="tool_calls"))
    reply = await ModelClient(config()).chat(MESSAGES)
    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("c1", "read", '{"a": 1}')]
    assert reply.assistant_message()["content"] is None


async def test_an_azure_error_is_mapped_and_its_echoed_key_masked(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("AZURE_API_KEY", KEY)
    monkeypatch.setenv("AZURE_API_VERSION", "2024-06-01")
    rec = Recorder(status=401)
    with thread_server(rec.app()) as base:
        monkeypatch.setenv("AZURE_API_BASE", base)
        client = ModelClient(ProposerConfig(model="azure/my-gpt4o", max_retries=0))
        with pytest.raises(UserError, match="AZURE_API_KEY") as info:
            await client.chat(MESSAGES)
        await client.aclose()
    assert rec.seen and KEY not in str(info.value) and "***" in str(info.value)
    assert info.value.__cause__ is None
