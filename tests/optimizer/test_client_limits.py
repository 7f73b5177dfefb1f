"""The container client under pressure: rate limits waited out, slots, routing over several URLs.

httpx.MockTransport, no sockets; each test has an ``EndpointLimits`` of its own.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable

import httpx
import pytest

from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.limits import EndpointLimits
from schemas import RolloutFailed, RolloutRequest

OK = {"reward": 1.0, "feedback": "correct"}
REQUEST = RolloutRequest(candidate={"system_prompt": "x"}, seed="a")

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def _client(
    handler: Handler, urls: list[str] | None = None, *, share: int = 8, **policy: float
) -> ContainerClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = ContainerClient(
        urls or ["http://c1"],
        http=http,
        policy=RetryPolicy(**{"max_retries": 2, "base_delay_s": 0.0, **policy}),  # type: ignore[arg-type]
        rng=random.Random(0),
        limits=EndpointLimits(),
    )
    client.join(share)
    return client


async def test_429s_spend_no_retries_while_the_rate_limit_wait_lasts() -> None:
    answers = iter(
        [httpx.Response(429, headers={"Retry-After": "0"})] * 8 + [httpx.Response(200, json=OK)]
    )

    async def handler(request: httpx.Request) -> httpx.Response:
        return next(answers)

    outcome, retries = await _client(handler).rollout(REQUEST)  # --max-retries 2
    assert outcome is not None and outcome.response.reward == 1.0
    assert outcome.attempts == 9 and retries == 8


async def test_a_rate_limit_past_the_wait_fails_the_rollout_naming_the_flag() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "0.05"})

    client = _client(handler, rate_limit_wait_s=0.3)
    started = asyncio.get_running_loop().time()
    with pytest.raises(
        RolloutFailed, match=r"rate limit: http://c1 has answered only 429 for"
    ) as info:
        await client.rollout(REQUEST)
    assert info.value.reason == "rate_limit" and info.value.status == 429
    assert "--rate-limit-wait 0.3" in str(info.value)
    assert asyncio.get_running_loop().time() - started >= 0.3


async def test_other_faults_still_spend_the_retries() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502)

    with pytest.raises(RolloutFailed, match="after 3 attempts: HTTP 502"):
        await _client(handler).rollout(REQUEST)


def test_a_rate_limits_retry_after_is_honoured_past_the_usual_delay_cap() -> None:
    policy = RetryPolicy(max_retries=5, base_delay_s=0.5, max_delay_s=30.0)
    rng = random.Random(0)
    assert policy.limited_delay(1, rng, retry_after=45.0, left_s=600.0) == 45.0
    assert policy.limited_delay(1, rng, retry_after=45.0, left_s=10.0) == 10.0
    # Past the usual retries, Retry-After: 0 no longer means "hammer it": the backoff holds.
    assert policy.limited_delay(9, rng, retry_after=0.0, left_s=600.0) >= 15.0
    assert 0.25 <= policy.limited_delay(1, rng, retry_after=None, left_s=600.0) <= 0.5


async def test_requests_in_flight_stay_under_the_limit_it_learns() -> None:
    capacity, busy, peak = 3, {"n": 0}, {"n": 0}
    statuses: Counter[int] = Counter()

    async def handler(request: httpx.Request) -> httpx.Response:
        if busy["n"] >= capacity:
            statuses[429] += 1
            return httpx.Response(429, headers={"Retry-After": "0.02"})
        busy["n"] += 1
        peak["n"] = max(peak["n"], busy["n"])
        await asyncio.sleep(0.01)
        busy["n"] -= 1
        statuses[200] += 1
        return httpx.Response(200, json=OK)

    client = _client(handler, share=16)
    outcomes = await asyncio.gather(*(client.rollout(REQUEST) for _ in range(300)))
    assert all(o is not None for o, _ in outcomes)
    (view,) = client.limits_view()
    assert view["max"] == 16 and view["limit"] <= capacity + 1
    late_429s = statuses[429]
    # Once the limit found the capacity, refusals are rare: the last 200 rollouts saw few.
    outcomes = await asyncio.gather(*(client.rollout(REQUEST) for _ in range(200)))
    assert statuses[429] - late_429s < 0.05 * 200
    assert peak["n"] <= capacity


async def test_rollouts_spread_to_the_least_busy_url() -> None:
    in_flight: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        in_flight[host] += 1
        peak[host] = max(peak[host], in_flight[host])
        await asyncio.sleep(0.02)
        in_flight[host] -= 1
        return httpx.Response(200, json=OK)

    client = _client(handler, ["http://a", "http://b", "http://c"], share=9)
    await asyncio.gather(*(client.rollout(REQUEST) for _ in range(9)))
    assert peak == Counter({"a": 3, "b": 3, "c": 3})


async def test_a_refused_connection_goes_to_another_url_without_spending_a_retry() -> None:
    served: Counter[str] = Counter()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "dead":
            raise httpx.ConnectError("Connection refused")
        served[request.url.host] += 1
        return httpx.Response(200, json=OK)

    client = _client(handler, ["http://dead", "http://alive"], max_retries=0)
    results = await asyncio.gather(*(client.rollout(REQUEST) for _ in range(20)))
    assert all(outcome is not None and outcome.url == "http://alive" for outcome, _ in results)
    assert served["alive"] == 20


async def test_a_url_that_keeps_refusing_rests_longer_each_time() -> None:
    rests: list[float] = []
    holder: list[ContainerClient] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        # The rest its last refusal earned, as routing sees it.
        (endpoint,) = holder[0]._endpoints.all  # noqa: SLF001
        rest = endpoint.limit.down_until - asyncio.get_running_loop().time()
        rests.append(max(0.0, round(rest)))
        if len(rests) <= 4:
            raise httpx.ConnectError("Connection refused")
        return httpx.Response(200, json=OK)

    holder.append(_client(handler, max_retries=5))
    outcome, retries = await holder[0].rollout(REQUEST)
    assert outcome is not None and retries == 4
    assert rests == [0, 1, 2, 4, 8]


async def test_clients_of_one_process_share_each_urls_limit() -> None:
    # Two runs of one `serve` process are two clients on one event loop: no limits= given.
    a, b = ContainerClient(["http://c1"]), ContainerClient(["http://c1/", "http://c2"])
    try:
        a.join(8)
        b.join(4)
        first, second = a.limits_view()[0], b.limits_view()[0]
        assert first == second and first["max"] == 12  # one limit, both runs' shares
        assert b.limits_view()[1]["max"] == 4
    finally:
        await a.aclose()
        await b.aclose()
    assert a.limits_view()[0]["max"] is None  # both left: nobody holds a share


def test_another_event_loop_has_limits_of_its_own() -> None:
    async def registries() -> tuple[EndpointLimits, EndpointLimits]:
        return EndpointLimits.of_loop(), EndpointLimits.of_loop()

    (a, same), (b, _) = asyncio.run(registries()), asyncio.run(registries())
    assert a is same  # one per loop: every client of a process shares it
    assert a is not b  # a test's loop never sees another test's limits
