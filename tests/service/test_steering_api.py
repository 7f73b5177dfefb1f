"""Steering a run through the REST API in-process: ``POST /api/runs/{id}/actions`` and
``GET /api/runs/{id}/steering``, their refusals, and the service's own runs taking them in."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.service import ServiceSettings
from tests.service.conftest import SERVICE_URL, parse_sse, run_config, service, wait_status


async def _create(api: httpx.AsyncClient, reflection_url: str, **extra: Any) -> str:
    response = await api.post("/api/runs", json={"config": run_config(reflection_url, **extra)})
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


async def _act(api: httpx.AsyncClient, run_id: str, **body: Any) -> httpx.Response:
    return await api.post(f"/api/runs/{run_id}/actions", json=body)


def _error(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["type"], error["message"]


async def test_an_action_answers_the_stored_event_and_the_steering(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    run_id = await _create(api, reflection_url)
    assert (await api.get(f"/api/runs/{run_id}/steering")).json() == {
        "paused": False, "rejected": {}, "pinned": None, "notes": [], "stop": None, "seq": 0,
    }  # fmt: skip
    paused = await _act(api, run_id, action="pause", source="console")
    assert paused.status_code == 200, paused.text
    event = paused.json()["event"]
    assert event["type"] == "action" and event["run_id"] == run_id and event["ts"] > 0
    assert event["data"] == {"action": "pause", "source": "console"}
    assert paused.json()["steering"]["paused"] is True
    noted = await _act(api, run_id, action="note", text="look at the refund cases")
    note = noted.json()["steering"]["notes"][0]
    assert note["text"] == "look at the refund cases" and note["source"] == "rest"
    assert note["candidate_id"] is None and note["seq"] == noted.json()["event"]["seq"]
    steering = (await api.get(f"/api/runs/{run_id}/steering")).json()
    assert steering == noted.json()["steering"] and steering["paused"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "jump"}, "action"),
        ({"action": "pause", "source": "cli"}, "source"),
        ({"action": "reject", "candidate_id": "x"}, "reason"),
        ({"action": "note"}, "text"),
        ({"action": "pause", "extra": 1}, "extra"),
    ],
)
async def test_a_body_that_is_not_an_action_is_422_naming_the_field(
    api: httpx.AsyncClient, reflection_url: str, body: dict[str, Any], field: str
) -> None:
    run_id = await _create(api, reflection_url)
    status, kind, message = _error(await _act(api, run_id, **body))
    assert (status, kind) == (422, "InvalidAction") and field in message
    not_json = await api.post(
        f"/api/runs/{run_id}/actions", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 422
    assert (await api.get(f"/api/runs/{run_id}/steering")).json()["seq"] == 0


async def test_an_unknown_run_or_candidate_is_404_and_a_misfit_409_naming_the_fix(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    for response in (
        await _act(api, "run-nope", action="pause"),
        await api.get("/api/runs/run-nope/steering"),
    ):
        status, _, message = _error(response)
        assert status == 404 and "unknown run 'run-nope'" in message and "GET /api/runs" in message
    run_id = await _create(api, reflection_url)
    status, _, message = _error(await _act(api, run_id, action="pin", candidate_id="feedbeef"))
    assert status == 404 and f"GET /api/runs/{run_id}/candidates" in message
    status, kind, message = _error(await _act(api, run_id, action="resume"))
    assert (status, kind) == (409, "Conflict") and "not paused" in message
    status, _, message = _error(await _act(api, run_id, action="unpin"))
    assert status == 409 and "nothing to unpin" in message


async def test_the_token_and_the_same_origin_rule_guard_the_actions(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    token = "steer-token-123"
    async with service(tmp_path / "ws", toy_app, ServiceSettings(token=token)) as (api, _):
        auth = {"Authorization": f"Bearer {token}"}
        created = await api.post(
            "/api/runs", json={"config": run_config(reflection_url)}, headers=auth
        )
        run_id = created.json()["run_id"]
        path = f"/api/runs/{run_id}/actions"
        assert (await api.post(path, json={"action": "pause"})).status_code == 401
        assert (await api.get(f"/api/runs/{run_id}/steering")).status_code == 401
        foreign = {**auth, "Origin": "https://evil.example"}
        refused = await api.post(path, json={"action": "pause"}, headers=foreign)
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "CrossOrigin"
        own = await api.post(
            path, json={"action": "pause"}, headers={**auth, "Origin": SERVICE_URL}
        )
        assert own.status_code == 200
        steering = await api.get(f"/api/runs/{run_id}/steering", headers=auth)
        assert steering.json()["paused"] is True and steering.json()["seq"] > 0


async def test_a_run_paused_before_it_starts_sends_nothing_until_resumed(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    run_id = await _create(api, reflection_url)
    await _act(api, run_id, action="pause")
    started = await api.post(f"/api/runs/{run_id}/start")
    assert started.status_code == 202
    await asyncio.sleep(1.2)  # two of the run's reads of its actions
    view = (await api.get(f"/api/runs/{run_id}")).json()
    assert view["active"] and view["phase"] == "evaluating_baseline"
    assert view["budget"]["paid"] == 0 and view["budget"]["cached"] == 0
    await _act(api, run_id, action="resume", source="console")
    done = await wait_status(api, run_id, {"completed"})
    assert done["budget"]["paid"] > 0
    # Both actions are in the run's log, as the timeline reads it, each taken in by the run.
    events = [json.loads(data) for name, _, data in parse_sse(
        (await api.get(f"/api/runs/{run_id}/events", params={"after": 0})).text
    ) if name is None]  # fmt: skip
    actions = [e for e in events if e["type"] == "action"]
    applied = [e["data"] for e in events if e["type"] == "action_applied"]
    assert [a["data"]["action"] for a in actions] == ["pause", "resume"]
    assert [(a["action_seq"], a["paused"]) for a in applied] == [
        (actions[0]["seq"], True),
        (actions[1]["seq"], False),
    ]
    status, _, message = _error(await _act(api, run_id, action="pause"))
    assert status == 409 and f"run {run_id} has completed" in message
