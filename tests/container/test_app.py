"""The Starlette app in-process: routes, return shapes, status codes and error bodies."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from container import AgentResult, Candidate, Retryable, Task, create_app
from schemas import PROTOCOL, ErrorBody, Program, RolloutResponse
from tests.container.conftest import make_target

ClientFor = Callable[..., httpx.AsyncClient]
BASELINE = "Classify the message."


def _body(
    seed: str = "row-0", candidate: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "candidate_id": "cand-1",
        "candidate": candidate if candidate is not None else {"system_prompt": BASELINE},
        "seed": seed,
        **extra,
    }


def _label_target(**options: Any) -> Any:
    """A target answering the row's label, so the default verifier scores 1."""

    def classify(task: Task, candidate: Candidate) -> AgentResult:
        return AgentResult(output=task.expected, input_tokens=12, output_tokens=3, cost_usd=0.002)

    return make_target(classify, **options)


def _error(response: httpx.Response) -> tuple[str, str]:
    body = ErrorBody.model_validate(response.json())
    return body.error.type, body.error.message


async def test_health_and_program(dataset_path: Path, client_for: ClientFor) -> None:
    target = _label_target(id="b77", kind="prompt", description="Intent classification")
    async with client_for(create_app(target, dataset=dataset_path)) as client:
        health = await client.get("/health")
        program = await client.get("/program")
    assert health.status_code == 200 and health.json() == {"status": "ok", "protocol": PROTOCOL}
    assert program.status_code == 200
    parsed = Program.model_validate(program.json())
    assert parsed.program_id == "b77" and parsed.protocol == PROTOCOL
    assert [c.model_dump() for c in parsed.components] == [
        {
            "name": "system_prompt",
            "kind": "prompt",
            "description": "Intent classification",
            "text": BASELINE,
        }
    ]
    assert (len(parsed.seeds.train), len(parsed.seeds.val), len(parsed.seeds.holdout)) == (6, 2, 2)
    assert len(parsed.fingerprint) == 64 and parsed.objectives == ["reward"]


async def test_rollout_with_agent_result(dataset_path: Path, client_for: ClientFor) -> None:
    async with client_for(create_app(_label_target(), dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body("row-7"))
    assert response.status_code == 200
    body = RolloutResponse.model_validate(response.json())
    assert body.reward == 1.0 and body.objectives == {"reward": 1.0}
    assert body.output == "lost_card" and body.feedback == "correct: predicted lost_card"
    assert (body.usage.input_tokens, body.usage.output_tokens, body.usage.cost_usd) == (
        12,
        3,
        0.002,
    )
    assert body.usage.latency_ms >= 0 and body.error is None


async def test_task_and_candidate_reach_the_target(
    dataset_path: Path, client_for: ClientFor
) -> None:
    seen: list[tuple[Task, Candidate]] = []

    def spy(task: Task, candidate: Candidate) -> str:
        seen.append((task, candidate))
        return "card_arrival"

    app = create_app(make_target(spy), dataset=dataset_path)
    async with client_for(app) as client:
        program = Program.model_validate((await client.get("/program")).json())
        seed = program.seeds.holdout[0]
        response = await client.post(
            "/rollout",
            json=_body(seed, {"system_prompt": "new prompt"}, policy={"model": "student-x"}),
        )
        default = await client.post("/rollout", json=_body(program.seeds.train[0]))
    assert response.status_code == 200 and default.status_code == 200
    (task, candidate), (train_task, default_candidate) = seen
    assert (task.name, task.split) == (seed, "holdout")
    assert task.input == {"text": f"message {seed.split('-')[1]}"}
    assert train_task.split == "train" and task.metadata == {}
    assert (candidate.text, candidate.candidate_id, candidate.model) == (
        "new prompt",
        "cand-1",
        "student-x",
    )
    assert default_candidate.model is None


async def test_a_target_cannot_edit_the_dataset(tmp_path: Path, client_for: ClientFor) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "input": {"items": [1]}, "label": "x", "tags": ["t"]}\n')

    def vandal(task: Task, candidate: Candidate) -> str:
        task.input["items"].append(2)
        task.metadata["tags"].append("new")  # type: ignore[index]
        return str(len(task.input["items"]))

    async with client_for(create_app(make_target(vandal), dataset=path)) as client:
        outputs = [(await client.post("/rollout", json=_body("a"))).json()["output"] for _ in "12"]
    assert outputs == ["2", "2"]


async def test_str_and_dict_returns(dataset_path: Path, client_for: ClientFor) -> None:
    string = make_target(lambda task, candidate: "lost_card", id="s")
    mapping = make_target(
        lambda task, candidate: {"output": "lost card", "output_tokens": 9, "latency_ms": 42.0},
        id="d",
    )
    async with client_for(create_app(string, dataset=dataset_path)) as client:
        hit = (await client.post("/rollout", json=_body("row-6"))).json()
        miss = (await client.post("/rollout", json=_body("row-0"))).json()
    assert (hit["reward"], hit["output"]) == (1.0, "lost_card")
    assert (miss["reward"], miss["feedback"]) == (0.0, "predicted lost_card, expected card_arrival")
    async with client_for(create_app(mapping, dataset=dataset_path)) as client:
        body = (await client.post("/rollout", json=_body("row-6"))).json()
    assert body["reward"] == 1.0 and body["usage"]["output_tokens"] == 9
    assert body["usage"]["latency_ms"] == 42.0  # the target's own figure wins


async def test_sync_target_runs_in_a_worker_thread_async_on_the_loop(
    dataset_path: Path, client_for: ClientFor
) -> None:
    threads: dict[str, int] = {}

    def sync_target(task: Task, candidate: Candidate) -> str:
        threads["sync"] = threading.get_ident()
        return "x"

    async def async_target(task: Task, candidate: Candidate) -> str:
        threads["async"] = threading.get_ident()
        await asyncio.sleep(0)
        return "x"

    loop_thread = threading.get_ident()
    for fn in (sync_target, async_target):
        async with client_for(create_app(make_target(fn), dataset=dataset_path)) as client:
            assert (await client.post("/rollout", json=_body())).status_code == 200
    assert threads["sync"] != loop_thread and threads["async"] == loop_thread


async def test_trace_is_merged_and_can_be_left_out(
    dataset_path: Path, client_for: ClientFor
) -> None:
    def traced(task: Task, candidate: Candidate) -> AgentResult:
        return AgentResult(
            output="x",
            trace_id="tr-9",
            metadata={"k": 1},
            trace={
                "messages": [{"role": "system", "content": candidate.text}],
                "tool_calls": [{"name": "search", "arguments": {"q": "x"}}],
            },
            messages=[{"role": "assistant", "content": "x"}],
        )

    async with client_for(create_app(make_target(traced), dataset=dataset_path)) as client:
        full = (await client.post("/rollout", json=_body())).json()["trace"]
        empty = (await client.post("/rollout", json=_body(return_trace=False))).json()["trace"]
    assert [m["role"] for m in full["messages"]] == ["system", "assistant"]
    assert full["tool_calls"] == [{"name": "search", "arguments": {"q": "x"}}]
    assert full["events"] == [
        {
            "type": "task",
            "seed": "row-0",
            "input": {"text": "message 0"},
            "expected": "card_arrival",
        },
        {"type": "agent_result", "trace_id": "tr-9", "metadata": {"k": 1}},
    ]
    assert empty == {"messages": [], "tool_calls": [], "events": []}


async def test_bad_json_and_invalid_body_are_400(dataset_path: Path, client_for: ClientFor) -> None:
    async with client_for(create_app(_label_target(), dataset=dataset_path)) as client:
        not_json = await client.post("/rollout", content=b"{not json")
        invalid = await client.post("/rollout", json={"candidate": "text", "return_trace": "maybe"})
    assert not_json.status_code == 400 and _error(not_json)[0] == "InvalidBody"
    assert "not valid JSON" in _error(not_json)[1]
    assert invalid.status_code == 400
    message = _error(invalid)[1]
    for field in ("candidate", "seed", "return_trace"):
        assert field in message


async def test_unknown_seed_is_404(dataset_path: Path, client_for: ClientFor) -> None:
    async with client_for(create_app(_label_target(), dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body("row-999"))
    assert response.status_code == 404
    assert _error(response) == ("UnknownSeed", _error(response)[1])
    assert "row-999" in _error(response)[1]


async def test_component_mismatch_is_422_naming_them(
    dataset_path: Path, client_for: ClientFor
) -> None:
    target = make_target(lambda task, candidate: "x", baseline={"planner": "p", "writer": "w"})
    async with client_for(create_app(target, dataset=dataset_path)) as client:
        missing = await client.post("/rollout", json=_body(candidate={"planner": "p"}))
        unknown = await client.post(
            "/rollout", json=_body(candidate={"planner": "p", "writer": "w", "critic": "c"})
        )
    assert missing.status_code == 422 and unknown.status_code == 422
    assert "missing component(s): writer" in _error(missing)[1]
    assert "unknown component(s): critic" in _error(unknown)[1]


async def test_bearer_token(dataset_path: Path, client_for: ClientFor) -> None:
    app = create_app(_label_target(), dataset=dataset_path, token="s3cret")
    async with client_for(app) as client:
        assert (await client.get("/health")).status_code == 200  # probes need no token
        no_token = await client.post("/rollout", json=_body())
        wrong = await client.get("/program", headers={"Authorization": "Bearer nope"})
        right = await client.post(
            "/rollout", json=_body(), headers={"Authorization": "Bearer s3cret"}
        )
        program = await client.get("/program", headers={"Authorization": "Bearer s3cret"})
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    assert "missing bearer token" in _error(no_token)[1]
    assert wrong.status_code == 401 and "wrong bearer token" in _error(wrong)[1]
    assert right.status_code == 200 and program.status_code == 200


async def test_the_bearer_scheme_is_case_insensitive(
    dataset_path: Path, client_for: ClientFor
) -> None:
    app = create_app(_label_target(), dataset=dataset_path, token="s3cret")
    async with client_for(app) as client:
        lower = await client.get("/program", headers={"Authorization": "bearer s3cret"})
        upper = await client.get("/program", headers={"Authorization": "BEARER  s3cret"})
        basic = await client.get("/program", headers={"Authorization": "Basic s3cret"})
    assert lower.status_code == 200 and upper.status_code == 200
    assert basic.status_code == 401 and "wrong bearer token" in _error(basic)[1]


async def test_body_over_limit_is_413(dataset_path: Path, client_for: ClientFor) -> None:
    app = create_app(_label_target(), dataset=dataset_path, max_body_bytes=300)
    big = _body(candidate={"system_prompt": "x" * 400})

    async def chunks() -> Any:  # no Content-Length: only the streamed size can tell
        for _ in range(4):
            yield b"x" * 100

    async with client_for(app) as client:
        declared = await client.post("/rollout", json=big)
        streamed = await client.post("/rollout", content=chunks())
        small = await client.post("/rollout", json=_body())
    assert declared.status_code == 413 and "over the limit of 300 bytes" in _error(declared)[1]
    assert streamed.status_code == 413 and _error(streamed)[0] == "PayloadTooLarge"
    assert small.status_code == 200


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://student.test/v1/chat/completions")


def _status_error(
    cls: type[openai.APIStatusError], status: int, headers: dict[str, str]
) -> Exception:
    response = httpx.Response(status, headers=headers, request=_request(), json={"error": {}})
    return cls(f"student said {status}", response=response, body=None)


@pytest.mark.parametrize(
    ("error", "status", "retry_after"),
    [
        (_status_error(openai.RateLimitError, 429, {"retry-after": "7"}), 429, "7"),
        (_status_error(openai.RateLimitError, 429, {"retry-after-ms": "1500"}), 429, "2"),
        (_status_error(openai.RateLimitError, 429, {}), 429, None),
        (_status_error(openai.InternalServerError, 502, {"retry-after": "4"}), 503, "4"),
        (openai.APIConnectionError(request=_request()), 503, None),
        (openai.APITimeoutError(request=_request()), 503, None),
        (Retryable("model overloaded", retry_after=2.5), 503, "3"),
        (Retryable("quota", rate_limited=True, retry_after=10), 429, "10"),
        (Retryable("later"), 503, None),
        (httpx.ConnectError("refused"), 503, None),
    ],
)
async def test_infrastructure_faults_map_to_429_and_503(
    dataset_path: Path,
    client_for: ClientFor,
    error: Exception,
    status: int,
    retry_after: str | None,
) -> None:
    async def failing(task: Task, candidate: Candidate) -> str:
        raise error

    async with client_for(create_app(make_target(failing), dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body())
    assert response.status_code == status
    assert response.headers.get("retry-after") == retry_after
    assert _error(response)[0] == type(error).__name__ and "reward" not in response.json()


def test_faults_are_mapped_without_the_openai_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from container.faults import fault_status

    monkeypatch.setitem(sys.modules, "openai", None)  # as in a process that never loaded it
    assert fault_status(httpx.ConnectError("refused")) == (503, None)
    assert fault_status(Retryable("quota", rate_limited=True, retry_after=2)) == (429, "2")
    assert fault_status(KeyError("q")) == (500, None)


async def test_other_exceptions_are_500_with_type_and_message(
    dataset_path: Path, client_for: ClientFor
) -> None:
    def broken(task: Task, candidate: Candidate) -> str:
        raise KeyError("missing key 'q'")

    auth = _status_error(openai.AuthenticationError, 401, {})

    async def unauthorized(task: Task, candidate: Candidate) -> str:
        raise auth

    async with client_for(create_app(make_target(broken), dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body())
    assert response.status_code == 500
    assert response.json() == {"error": {"type": "KeyError", "message": "\"missing key 'q'\""}}
    async with client_for(create_app(make_target(unauthorized), dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body())
    assert response.status_code == 500 and _error(response)[0] == "AuthenticationError"


async def test_verifier_faults_are_mapped_too(dataset_path: Path, client_for: ClientFor) -> None:
    def flaky_verifier(task: Task, result: AgentResult) -> float:
        raise Retryable("judge busy", retry_after=1)

    app = create_app(_label_target(), dataset=dataset_path, verifier=flaky_verifier)
    async with client_for(app) as client:
        response = await client.post("/rollout", json=_body())
    assert response.status_code == 503 and response.headers["retry-after"] == "1"


async def test_unknown_route_and_method_answer_with_error_bodies(
    dataset_path: Path, client_for: ClientFor
) -> None:
    async with client_for(create_app(_label_target(), dataset=dataset_path)) as client:
        missing = await client.get("/nope")
        wrong_method = await client.get("/rollout")
    assert missing.status_code == 404 and _error(missing)[0] == "HTTPError"
    assert wrong_method.status_code == 405 and _error(wrong_method)[0] == "HTTPError"
    assert wrong_method.headers["allow"] == "POST"


def test_create_app_reports_configuration_errors(tmp_path: Path, dataset_path: Path) -> None:
    from schemas import UserError

    with pytest.raises(UserError, match="has no dataset"):
        create_app(_label_target())
    with pytest.raises(UserError, match="does not exist"):
        create_app(_label_target(), dataset=tmp_path / "missing.jsonl")
    with pytest.raises(UserError, match="unknown verifier type"):
        create_app(_label_target(), dataset=dataset_path, verifier={"type": "fuzzy"})
