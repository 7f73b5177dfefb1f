"""The reflection client's transport (``schemas.chat_http``): the openai client's retry rule
and error shapes, over httpx, and the Azure client's errors mapped the same way."""

from __future__ import annotations

import random
import ssl
import time
from email.utils import formatdate

import httpx
import pytest

from optimizer.testing import thread_server
from proposer import ModelClient, ProposerConfig
from schemas import ProposerError, UserError
from schemas.chat_http import _tls, retry_delay, should_retry
from tests.fakes.asgi import clear_proxies
from tests.proposer.fakes import completion, config, scripted
from tests.proposer.test_providers import KEY, Recorder, _clean

MESSAGES = [{"role": "user", "content": "hi"}]


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_which_answers_are_retried() -> None:
    assert all(should_retry(_answer(s)) for s in (408, 409, 429, 500, 502, 503))
    assert not any(should_retry(_answer(s)) for s in (400, 401, 403, 404, 422))
    assert not should_retry(_answer(503, **{"x-should-retry": "false"}))
    assert should_retry(_answer(400, **{"x-should-retry": "true"}))
    assert not should_retry(_answer(429, **{"retry-after": "300"}))  # over two minutes: give up


def test_the_wait_before_a_retry() -> None:
    rng = random.Random(0)
    assert retry_delay(0, httpx.Headers({"retry-after": "3"}), rng) == 3.0
    assert retry_delay(0, httpx.Headers({"retry-after-ms": "1500"}), rng) == 1.5
    date = formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_delay(0, httpx.Headers({"retry-after": date}), rng) <= 30
    for tries, base in ((0, 0.5), (1, 1.0), (3, 4.0), (9, 8.0)):  # backoff, capped at 8 s
        waits = [retry_delay(tries, httpx.Headers(), rng) for _ in range(50)]
        assert all(0.75 * base <= w <= base for w in waits) and len(set(waits)) > 1
    assert retry_delay(1, httpx.Headers({"retry-after": "500"}), rng) <= 1.0  # not sane: backoff


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


def test_only_a_local_plain_http_server_skips_the_ca_bundle(monkeypatch) -> None:
    clear_proxies(monkeypatch)
    local = _tls("http://127.0.0.1:8013/v1/chat/completions")
    assert isinstance(local, ssl.SSLContext) and local.verify_mode == ssl.CERT_REQUIRED
    assert local.cert_store_stats()["x509_ca"] == 0
    assert _tls("https://127.0.0.1:8013/v1/chat/completions") is True
    assert _tls("http://models.example.com/v1/chat/completions") is True
    monkeypatch.setenv("ALL_PROXY", "https://proxy.example.com:3128")  # its TLS needs the bundle
    assert _tls("http://127.0.0.1:8013/v1/chat/completions") is True
