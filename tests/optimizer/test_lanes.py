"""The container client's transport: plain HTTP over kept-alive connections (a real uvicorn
server), TLS over a pool per queue worker, a proxy through httpx.

The server notes the client port of every request: that is the connection it came over.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient
from optimizer.runtime.rollouts.lanes import LaneTransport, lane_extensions
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.testing import free_port, thread_server
from schemas import RolloutRequest, RunConfig
from tests.fakes.asgi import clear_proxies, read_body
from workspace import Workspace

PROGRAM = {
    "protocol": "gepa-container/1",
    "program_id": "lanes",
    "fingerprint": "lanes-1",
    "components": [{"name": "system_prompt", "text": "x"}],
    "seeds": {"train": [f"s{i}" for i in range(30)], "holdout": ["h"]},
}


class Recorder:
    """A raw ASGI container that notes (method, path, seed, Host, client port) per request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        path = scope["path"]
        headers = dict(scope["headers"])
        seed = json.loads(body)["seed"] if body else None
        self.seen.append(
            {
                "path": path,
                "seed": seed,
                "host": headers[b"host"].decode(),
                "port": scope["client"][1],
                "headers": {k.decode(): v.decode() for k, v in headers.items()},
            }
        )
        if path.endswith("/health"):
            answer: dict[str, Any] = {"status": "ok", "protocol": "gepa-container/1"}
        elif path.endswith("/program"):
            answer = PROGRAM
        else:
            answer = {"reward": 1.0, "feedback": f"ok {seed}"}
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def ports(self, suffix: str) -> set[int]:
        return {s["port"] for s in self.seen if s["path"].endswith(suffix)}


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    with thread_server(recorder) as url:
        yield url, recorder


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)


async def test_plain_http_requests_reuse_one_kept_alive_connection(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    client = ContainerClient([url])
    try:
        await client.check_health()
        for i in range(3):
            for lane in (0, 1):
                request = RolloutRequest(candidate={"system_prompt": "x"}, seed=f"l{lane}-{i}")
                outcome, _ = await client.rollout(request, lane=lane)
                assert outcome is not None and outcome.response.feedback == f"ok l{lane}-{i}"
        await client.program()
    finally:
        await client.aclose()
    # One request at a time, whatever its lane: one connection, kept alive throughout.
    assert len(recorder.seen) == 8 and len({s["port"] for s in recorder.seen}) == 1


async def test_a_rollout_carries_the_token_and_the_headers_of_the_clients_other_requests(
    server: tuple[str, Recorder],
) -> None:
    """Rollouts skip httpx's client layers: their headers must not lose anything by it."""
    url, recorder = server
    client = ContainerClient([url], token="tok-lanes-1")
    try:
        await client.check_health()
        request = RolloutRequest(candidate={"system_prompt": "x"}, seed="s1")
        outcome, _ = await client.rollout(request, lane=0)
        assert outcome is not None and outcome.response.feedback == "ok s1"
    finally:
        await client.aclose()
    health, rollout = (s["headers"] for s in recorder.seen)
    assert rollout["authorization"] == health["authorization"] == "Bearer tok-lanes-1"
    assert rollout["content-type"] == "application/json"
    for name in ("user-agent", "accept", "accept-encoding", "host"):
        assert rollout[name] == health[name], name


class _Pool(httpx.AsyncBaseTransport):
    """Stands in for httpx's TLS transport: notes which instance carried which request."""

    made: list[_Pool] = []

    def __init__(self, **kwargs: Any) -> None:
        self.seen: list[str] = []
        _Pool.made.append(self)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(str(request.url))
        return httpx.Response(200, json={"status": "ok"})


async def test_tls_requests_go_to_a_pool_per_lane_and_plain_ones_to_none(
    server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = server
    _Pool.made = []
    monkeypatch.setattr(httpx, "AsyncHTTPTransport", _Pool)
    transport = LaneTransport(httpx.Limits())
    async with httpx.AsyncClient(transport=transport) as http:
        for lane in (0, 1, 0, None, 1, None):
            await http.get("https://tls.test/x", extensions=lane_extensions({}, lane))
        await http.get(f"{url}/health", extensions=lane_extensions({}, 0))
    assert [len(p.seen) for p in _Pool.made] == [2, 2, 2]  # lane 0, lane 1, the shared one
    assert recorder.ports("/health")  # plain HTTP took no pool
    assert transport._tls is not None and transport._tls.cert_store_stats()["x509_ca"] > 0


async def test_queue_workers_keep_at_most_a_connection_each(
    server: tuple[str, Recorder], tmp_path: Path
) -> None:
    url, recorder = server
    client = ContainerClient([url])
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.create_run(RunConfig(containers=[url]))
        await client.check_health()
        program = await client.program()
        budget = Budget(max_calls=100)
        async with RolloutQueue(
            client=client,
            workspace=ws,
            run_id=run.run_id,
            program=program,
            budget=budget,
            events=EventSink(ws, run.run_id),
            concurrency=3,
        ) as queue:
            results = await queue.evaluate("c1", {"system_prompt": "y"}, PROGRAM["seeds"]["train"])
        await client.aclose()
    assert budget.paid == 30 and all(r.reward == 1.0 for r in results.values())
    rollouts = recorder.ports("/rollout")
    # One connection a worker at most, kept alive: GET /health and /program's is reused too.
    assert 1 <= len(rollouts) <= 3 and len({s["port"] for s in recorder.seen}) <= 3


async def test_a_proxy_named_by_the_environment_still_carries_the_rollouts(
    server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_url, proxy = server  # the recorder answers as the container would
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    container = f"http://127.0.0.1:{free_port()}"  # nothing listens there: only the proxy
    client = ContainerClient([container])
    try:
        await client.check_health()
        request = RolloutRequest(candidate={"system_prompt": "x"}, seed="s1")
        outcome, _ = await client.rollout(request, lane=0)
    finally:
        await client.aclose()
    assert outcome is not None and outcome.response.feedback == "ok s1"
    assert [s["host"] for s in proxy.seen] == [container.removeprefix("http://")] * 2
