"""Every provider route of ``transport.routing.PROVIDERS`` against a scripted server.

Each route is pointed by base URL at a real OpenAI-compatible server on 127.0.0.1 that
records what arrives (path, headers, body): the model name without its prefix, the key of the
provider's own variable, and the body shaped by the provider's quirks. The default URLs of
the table are checked where the request would really go (``respx`` at that URL).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import respx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from container.student import StudentClients
from optimizer.testing import thread_server
from proposer import ModelClient, ProposerConfig, resolve_endpoint
from schemas import UserError
from tests.proposer.fakes import Script, completion
from transport.routing import PROVIDERS, route_model

KEY = "provider key 7f3a"  # nothing key-shaped: only the scrubber's knowledge can mask it
# A conversation with a tool round, names on messages and a strict tool schema: what the
# reflection agent sends, plus the fields some providers refuse.
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You edit prompts.", "name": "runtime"},
    {"role": "user", "content": "Fix the prompt."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "abc123XYZ", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "abc123XYZ", "name": "read", "content": "the prompt"},
]
TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "strict": True,
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}
# (prefix, key variable, expected URL of the table)
OPENAI_COMPATIBLE = [
    ("anthropic", "ANTHROPIC_API_KEY", "https://api.anthropic.com/v1"),
    ("gemini", "GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta/openai"),
    ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    ("mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
    ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
    ("together_ai", "TOGETHER_API_KEY", "https://api.together.xyz/v1"),
    ("fireworks_ai", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1"),
    ("xai", "XAI_API_KEY", "https://api.x.ai/v1"),
]


class Recorder:
    """A scripted OpenAI-compatible server that keeps every request it gets."""

    def __init__(self, status: int = 200) -> None:
        self.seen: list[dict[str, Any]] = []
        self.status = status

    def app(self) -> Starlette:
        async def completions(request: Request) -> JSONResponse:
            body = json.loads(await request.body())
            self.seen.append(
                {"path": request.url.path, "query": dict(request.query_params),
                 "headers": dict(request.headers), "body": body}
            )  # fmt: skip
            if self.status != 200:
                quoted = request.headers.get("authorization") or request.headers.get("api-key")
                error = {"message": f"Incorrect API key provided: {quoted}", "type": "auth"}
                return JSONResponse({"error": error}, status_code=self.status)
            return JSONResponse(completion("done", prompt_tokens=10, completion_tokens=2))

        return Starlette(routes=[Route("/{path:path}", completions, methods=["POST"])])


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()
    with thread_server(rec.app()) as url:
        yield rec, url


def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for row in PROVIDERS.values():
        for name in row.key_envs:
            monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LITELLM_PROXY_API_BASE",
                 "LITELLM_PROXY_API_KEY", "AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


async def _reflect(model: str, url: str | None, **config: Any) -> None:
    client = ModelClient(ProposerConfig(model=model, base_url=url, max_retries=0, **config))
    try:
        await client.chat(MESSAGES, tools=[TOOL])
    finally:
        await client.aclose()


@pytest.mark.parametrize(("prefix", "variable", "url"), OPENAI_COMPATIBLE)
async def test_each_provider_gets_its_model_name_key_and_url(
    prefix: str, variable: str, url: str, recorder: tuple[Recorder, str], monkeypatch
) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv(variable, KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "the-openai-key-is-not-sent")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # not for a provider row
    assert resolve_endpoint(ProposerConfig(model=f"{prefix}/m-1")).base_url == url
    rec, base = recorder
    await _reflect(f"{prefix}/m-1", f"{base}/v1", seed=7, temperature=1.5)
    arrived = rec.seen[0]
    assert arrived["path"] == "/v1/chat/completions"
    assert arrived["body"]["model"] == "m-1"
    assert arrived["headers"]["authorization"] == f"Bearer {KEY}"
    assert arrived["body"]["max_tokens"] == 2048 and arrived["body"]["tools"]


async def test_quirks_reach_the_wire(recorder: tuple[Recorder, str], monkeypatch) -> None:
    _clean(monkeypatch)
    for _, variable, _ in OPENAI_COMPATIBLE:
        monkeypatch.setenv(variable, KEY)
    rec, base = recorder
    for prefix in ("anthropic", "mistral", "groq", "xai", "deepseek"):
        await _reflect(f"{prefix}/m", f"{base}/v1", seed=7, temperature=1.5)
    anthropic, mistral, groq, xai, deepseek = (r["body"] for r in rec.seen)
    # Anthropic: temperatures in [0, 1], seed ignored there, so not sent.
    assert anthropic["temperature"] == 1.0 and "seed" not in anthropic
    # Mistral: [0, 1], random_seed, name on tool messages only, plain tool schemas.
    assert mistral["temperature"] == 1.0 and mistral["random_seed"] == 7 and "seed" not in mistral
    assert "name" not in mistral["messages"][0] and mistral["messages"][3]["name"] == "read"
    function = mistral["tools"][0]["function"]
    assert "strict" not in function and "additionalProperties" not in function["parameters"]
    # Groq: no names, no null fields beside tool calls; xAI: no names.
    assert all("name" not in m for m in groq["messages"])
    assert "content" not in groq["messages"][2] and groq["messages"][2]["tool_calls"]
    assert all("name" not in m for m in xai["messages"]) and xai["messages"][2]["content"] is None
    # A provider without quirks gets the body as written.
    assert deepseek["temperature"] == 1.5 and deepseek["seed"] == 7
    assert deepseek["messages"][0]["name"] == "runtime" and deepseek["tools"][0] == TOOL


async def test_reasoning_names_keep_max_tokens_where_only_that_is_taken(
    recorder: tuple[Recorder, str], monkeypatch
) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("MISTRAL_API_KEY", KEY)
    monkeypatch.setenv("GROQ_API_KEY", KEY)
    rec, base = recorder
    await _reflect("mistral/o3-like", f"{base}/v1")  # o-names get max_completion_tokens
    await _reflect("groq/o3-like", f"{base}/v1")
    assert rec.seen[0]["body"]["max_tokens"] == 2048 * 4
    assert "max_completion_tokens" not in rec.seen[0]["body"]
    assert rec.seen[1]["body"]["max_completion_tokens"] == 2048 * 4


async def test_anthropic_by_default_reaches_its_endpoint_with_its_key(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    script = Script(completion("ok"))
    with respx.mock(assert_all_called=True) as router:
        router.post("https://api.anthropic.com/v1/chat/completions").mock(side_effect=script)
        client = ModelClient(ProposerConfig(model="anthropic/claude-sonnet-4-5", max_retries=0))
        await client.chat([{"role": "user", "content": "hi"}])
        await client.aclose()
    assert script.requests[0]["model"] == "claude-sonnet-4-5"
    assert script.raw[0].headers["authorization"] == f"Bearer {KEY}"


def test_together_answers_to_either_variable(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("TOGETHERAI_API_KEY", KEY)
    endpoint = resolve_endpoint(ProposerConfig(model="together_ai/meta/llama"))
    assert endpoint.api_key_env == "TOGETHERAI_API_KEY" and endpoint.model == "meta/llama"
    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    assert resolve_endpoint(ProposerConfig(model="together_ai/x")).api_key_env == "TOGETHER_API_KEY"
    # a variable named on purpose is kept
    named = ProposerConfig(model="together_ai/x", api_key_env="MY_KEY")
    assert resolve_endpoint(named).api_key_env == "MY_KEY"


def test_a_missing_provider_key_names_its_variable(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "set-but-not-the-one")
    with pytest.raises(UserError, match="GEMINI_API_KEY"):
        ModelClient(ProposerConfig(model="gemini/gemini-2.5-flash"))


async def test_azure_goes_through_the_azure_client(
    recorder: tuple[Recorder, str], monkeypatch
) -> None:
    _clean(monkeypatch)
    rec, base = recorder
    monkeypatch.setenv("AZURE_API_KEY", KEY)
    monkeypatch.setenv("AZURE_API_BASE", base)
    monkeypatch.setenv("AZURE_API_VERSION", "2024-06-01")
    client = ModelClient(ProposerConfig(model="azure/my-gpt4o", max_retries=0))
    await client.chat([{"role": "user", "content": "hi"}])
    await client.aclose()
    arrived = rec.seen[0]
    assert arrived["path"] == "/openai/deployments/my-gpt4o/chat/completions"
    assert arrived["query"] == {"api-version": "2024-06-01"}
    assert arrived["headers"]["api-key"] == KEY and "authorization" not in arrived["headers"]
    monkeypatch.delenv("AZURE_API_BASE")
    with pytest.raises(UserError, match="AZURE_API_BASE"):
        resolve_endpoint(ProposerConfig(model="azure/my-gpt4o"))


async def test_bedrock_and_vertex_go_to_a_litellm_proxy_as_written(
    recorder: tuple[Recorder, str], monkeypatch
) -> None:
    _clean(monkeypatch)
    rec, base = recorder
    monkeypatch.setenv("LITELLM_PROXY_API_BASE", f"{base}/v1")
    monkeypatch.setenv("LITELLM_PROXY_API_KEY", KEY)
    await _reflect("bedrock/anthropic.claude-3-5-sonnet", None)
    await _reflect("vertex_ai/gemini-2.5-pro", None)
    assert [r["body"]["model"] for r in rec.seen] == [
        "bedrock/anthropic.claude-3-5-sonnet",
        "vertex_ai/gemini-2.5-pro",
    ]
    assert {r["headers"]["authorization"] for r in rec.seen} == {f"Bearer {KEY}"}


async def test_bedrock_without_a_proxy_goes_through_litellm(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm")
    asked: list[dict[str, Any]] = []

    async def acompletion(**kwargs: Any) -> Any:  # LiteLLM's own network call, recorded
        asked.append(kwargs)
        return litellm.ModelResponse(**completion("from bedrock"))

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    route = route_model("bedrock/anthropic.claude-3-5-sonnet", environ={})
    assert route.client == "litellm" and route.base_url is None
    client = ModelClient(ProposerConfig(model="bedrock/anthropic.claude-3-5-sonnet", seed=3))
    reply = await client.chat([{"role": "user", "content": "hi"}])
    assert reply.content == "from bedrock"
    assert asked[0]["model"] == "bedrock/anthropic.claude-3-5-sonnet" and asked[0]["seed"] == 3


def test_without_litellm_the_error_names_both_fixes(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    with pytest.raises(UserError, match=r"gepa-runtime\[litellm\].*LITELLM_PROXY_API_BASE"):
        ModelClient(ProposerConfig(model="vertex_ai/gemini-2.5-pro"))


async def test_an_echoed_provider_key_is_masked(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("GROQ_API_KEY", KEY)
    rec = Recorder(status=401)
    with thread_server(rec.app()) as base, pytest.raises(UserError) as info:
        await _reflect("groq/llama-3.3-70b", f"{base}/v1")
    assert rec.seen and KEY not in str(info.value) and "GROQ_API_KEY" in str(info.value)


async def test_the_student_plane_routes_and_shapes_alike(monkeypatch) -> None:
    _clean(monkeypatch)
    monkeypatch.setenv("MISTRAL_API_KEY", KEY)
    script = Script(completion("4"))
    # the container's own endpoint is a local server; a mistral/ policy goes to Mistral
    clients = StudentClients(base_url="http://127.0.0.1:8012/v1", api_key=None)
    with respx.mock(assert_all_called=True) as router:
        router.post("https://api.mistral.ai/v1/chat/completions").mock(side_effect=script)
        await clients.create(
            "mistral/mistral-small", messages=MESSAGES[:2], temperature=1.5, seed=1
        )
        await clients.aclose()
    body = script.requests[0]
    assert body["model"] == "mistral-small" and body["temperature"] == 1.0
    assert body["random_seed"] == 1 and "name" not in body["messages"][0]
    assert script.raw[0].headers["authorization"] == f"Bearer {KEY}"
