"""Container client: health, retries, Retry-After, 4xx, token (httpx.MockTransport, no sockets)."""

from __future__ import annotations

import random
from collections.abc import Callable

import httpx
import pytest
from pydantic import ValidationError

from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from schemas import (
    ContainerUnavailable,
    InvalidRollout,
    Program,
    ProtocolViolation,
    RolloutFailed,
    RolloutRequest,
    UserError,
)

PROGRAM = {
    "protocol": "gepa-container/1",
    "program_id": "p",
    "fingerprint": "f",
    "components": [{"name": "system_prompt", "text": "x"}],
    "seeds": {"train": ["a"], "holdout": ["b"]},
}
OK = {"reward": 1.0, "feedback": "correct"}
REQUEST = RolloutRequest(candidate={"system_prompt": "x"}, seed="a")


def _client(
    handler: Callable[[httpx.Request], httpx.Response], urls: list[str] | None = None, **kw: object
) -> ContainerClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    policy = RetryPolicy(max_retries=3, base_delay_s=0.0)
    return ContainerClient(
        urls or ["http://c1"], http=http, policy=policy, rng=random.Random(0), **kw
    )  # type: ignore[arg-type]


async def test_retries_infrastructure_faults_then_succeeds() -> None:
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "0"}),
            httpx.Response(503),
            httpx.Response(502),
            httpx.Response(200, json=OK),
        ]
    )
    client = _client(lambda request: next(answers))
    outcome, retries = await client.rollout(REQUEST)
    assert outcome is not None and outcome.response.reward == 1.0
    assert retries == 3 and outcome.attempts == 4


async def test_dropped_connections_are_retried() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 3:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, json=OK)

    outcome, retries = await _client(handler).rollout(REQUEST)
    assert outcome is not None and retries == 2


async def test_exhausted_retries_raise_rollout_failed_not_a_score() -> None:
    client = _client(
        lambda request: httpx.Response(503, json={"error": {"type": "Busy", "message": "later"}})
    )
    with pytest.raises(RolloutFailed, match="after 4 attempts: HTTP 503: Busy: later") as info:
        await client.rollout(REQUEST)
    assert info.value.attempts == 4 and info.value.status == 503


async def test_caller_faults_are_not_retried() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(
            404, json={"error": {"type": "UnknownSeed", "message": "no seed 'a'"}}
        )

    with pytest.raises(ProtocolViolation, match="404: UnknownSeed: no seed 'a'"):
        await _client(handler).rollout(REQUEST)
    assert calls["n"] == 1


async def test_refused_token_is_a_user_error_naming_the_fix() -> None:
    with pytest.raises(UserError, match="--token"):
        await _client(lambda request: httpx.Response(401)).rollout(REQUEST)


async def test_malformed_200_is_an_invalid_rollout_not_retried() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(200, json={"score": 1})

    with pytest.raises(InvalidRollout, match="reward: Field required") as info:
        await _client(handler).rollout(REQUEST)
    assert isinstance(info.value, ProtocolViolation) and info.value.attempts == 1
    assert calls["n"] == 1


async def test_a_bad_200_after_a_retry_counts_its_attempts() -> None:
    answers = iter([httpx.Response(503), httpx.Response(200, json={"reward": -0.5})])
    with pytest.raises(InvalidRollout, match=r"reward -0.5 is outside .*\[0, 1\]") as info:
        await _client(lambda request: next(answers)).rollout(REQUEST)
    assert info.value.attempts == 2


async def test_the_programs_declared_reward_range_is_the_one_checked() -> None:
    program = Program.model_validate({**PROGRAM, "reward_range": [-1, 10]})
    client = _client(lambda request: httpx.Response(200, json={"reward": 7.0}))
    outcome, _ = await client.rollout(REQUEST, reward_range=program.reward_range)
    assert outcome is not None and outcome.response.reward == 7.0
    with pytest.raises(InvalidRollout, match=r"outside the program's reward_range \[-1, 5\]"):
        await client.rollout(REQUEST, reward_range=(-1.0, 5.0))


@pytest.mark.parametrize("bad", [[1, 1], [0, "inf"], [2, 1]])
def test_a_reward_range_must_be_finite_and_ordered(bad: list[object]) -> None:
    with pytest.raises(ValidationError, match="reward_range must be"):
        Program.model_validate({**PROGRAM, "reward_range": bad})


async def test_a_refused_connection_is_a_connection_fault_not_a_timeout() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("no route")

    with pytest.raises(RolloutFailed, match="failed after 4 attempts: ConnectTimeout") as info:
        await _client(handler).rollout(REQUEST)
    assert (info.value.reason, info.value.timeout_s) == ("connection", None)


async def test_retry_after_is_honoured() -> None:
    policy = RetryPolicy(base_delay_s=10.0, max_delay_s=30.0)
    rng = random.Random(0)
    assert policy.delay(1, rng, retry_after=2.0) == 2.0
    assert policy.delay(1, rng, retry_after=999.0) == 30.0
    assert 5.0 <= policy.delay(1, rng, retry_after=None) <= 10.0
    assert 10.0 <= policy.delay(2, rng, retry_after=None) <= 20.0


async def test_unhealthy_urls_are_skipped_and_token_sent() -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("authorization")))
        if request.url.host == "down":
            raise httpx.ConnectError("refused")
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "protocol": "gepa-container/1"})
        if request.url.path == "/program":
            return httpx.Response(200, json=PROGRAM)
        return httpx.Response(200, json=OK)

    client = _client(handler, urls=["http://down", "http://up"], token="s3cret")
    report = await client.check_health()
    assert report["http://up"] is None and "unreachable" in (report["http://down"] or "")
    assert client.urls == ["http://up"]
    assert (await client.program()).program_id == "p"
    await client.rollout(REQUEST)
    assert all(auth == "Bearer s3cret" for host, auth in seen)
    assert seen[-1][0] == "up"


async def test_no_healthy_container_names_the_fix() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(ContainerUnavailable, match="gepa-runtime container"):
        await _client(handler).check_health()


async def test_wrong_protocol_version_is_unhealthy() -> None:
    client = _client(
        lambda request: httpx.Response(200, json={"status": "ok", "protocol": "gepa-container/9"})
    )
    with pytest.raises(ContainerUnavailable, match="gepa-container/9"):
        await client.check_health()
