"""The protocol conformance suite: both SDKs (and the TypeScript guide's agent) answer alike.

Every answer must validate against the JSON Schemas ``gepa-runtime schema`` prints, and the
same mistake must get the same status code, error ``type`` (and ``Retry-After``,
``WWW-Authenticate``, ``Allow``) from every container. The expected answers are the
protocol's and docs/container-errors.md's, written here once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonschema
import pytest

from tests.conformance.conftest import TOKEN, Server

pytestmark = pytest.mark.e2e

ALL = ("python", "node", "node-readme")
SDKS = ("python", "node")


def _validate(schemas: dict[str, Any], model: str, body: Any) -> None:
    jsonschema.Draft202012Validator(schemas[model]).validate(body)


def _send(server: Server, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, f"{server.url}{path}", timeout=30, **kwargs)


def _auth(token: str | None = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _rollout(server: Server, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "run_id": "run-1",
        "candidate_id": "cand-1",
        "candidate": {c: "echo it." if c == "system_prompt" else "[]" for c in server.components},
        "seed": server.seed,
    }
    body.update(fields)
    return body


@pytest.mark.parametrize("name", ALL)
def test_health_and_program_validate(
    name: str, start: Callable[[str], Server], schemas: dict[str, Any]
) -> None:
    server = start(name)
    health = _send(server, "GET", "/health")
    assert health.status_code == 200
    _validate(schemas, "Health", health.json())
    assert health.json() == {"status": "ok", "protocol": "gepa-container/1"}
    program = _send(server, "GET", "/program", headers=_auth())
    assert program.status_code == 200
    _validate(schemas, "Program", program.json())
    body = program.json()
    assert [c["name"] for c in body["components"]] == list(server.components)
    assert server.seed in body["seeds"]["train"] + body["seeds"]["val"] + body["seeds"]["holdout"]
    assert len(body["fingerprint"]) == 64


@pytest.mark.parametrize("name", ALL)
def test_a_rollout_is_scored_and_validates(
    name: str, start: Callable[[str], Server], schemas: dict[str, Any]
) -> None:
    server = start(name)
    answer = _send(server, "POST", "/rollout", json=_rollout(server), headers=_auth())
    assert answer.status_code == 200, answer.text
    _validate(schemas, "RolloutResponse", answer.json())
    body = answer.json()
    assert 0 <= body["reward"] <= 1 and body["objectives"] == {"reward": body["reward"]}
    assert body["trace"]["events"][0]["seed"] == server.seed


@dataclass(frozen=True)
class Case:
    """One mistake or fault and what every container must answer to it."""

    id: str
    status: int
    request: Callable[[Server], dict[str, Any]]
    servers: tuple[str, ...] = ALL
    headers: dict[str, str | None] = field(default_factory=dict)
    message: str = ""
    kind: str | None = None  # the error body's type, where both SDKs name it alike


def _post(body: Any = None, *, token: str | None = TOKEN, **kwargs: Any) -> dict[str, Any]:
    if isinstance(body, bytes):
        return {"method": "POST", "path": "/rollout", "content": body, "headers": _auth(token)}
    return {"method": "POST", "path": "/rollout", "json": body, "headers": _auth(token), **kwargs}


def _seed(seed: str) -> Callable[[Server], dict[str, Any]]:
    return lambda s: _post(_rollout(s, seed=seed))


def _chunks(total: int) -> Any:
    for _ in range(total // 10_000):
        yield b" " * 10_000


CASES = [
    Case("unknown-seed", 404, _seed("no-such-seed"), message="unknown seed 'no-such-seed'"),
    Case(
        "missing-component",
        422,
        lambda s: _post(_rollout(s, candidate={})),
        message="missing component",
        kind="ComponentMismatch",
    ),
    Case(
        "unknown-component",
        422,
        lambda s: _post(_rollout(s, candidate={**_rollout(s)["candidate"], "extra": "x"})),
        message="unknown component(s): extra",
        kind="ComponentMismatch",
    ),
    Case("body-not-json", 400, lambda s: _post(b"{oops"), message="not valid JSON"),
    Case("body-not-an-object", 400, lambda s: _post([1, 2]), message="invalid rollout request"),
    Case(
        "seed-missing",
        400,
        lambda s: _post({"candidate": _rollout(s)["candidate"]}),
        message="seed: Field required",
    ),
    Case(
        "component-not-text",
        400,
        lambda s: _post(_rollout(s, candidate={"system_prompt": 3})),
        message="candidate.system_prompt",
        kind="InvalidBody",
    ),
    Case(
        "body-over-the-limit",
        413,
        lambda s: _post(_rollout(s, run_id="x" * 1_000_100)),
        message="over the limit of 1000000 bytes",
        kind="PayloadTooLarge",
    ),
    Case(
        "body-over-the-limit-streamed",
        413,
        lambda s: {
            "method": "POST",
            "path": "/rollout",
            "content": _chunks(1_100_000),
            "headers": _auth(),
        },
        message="over the limit",
    ),
    Case(
        "no-token",
        401,
        lambda s: {"method": "GET", "path": "/program"},
        headers={"WWW-Authenticate": "Bearer"},
        message="missing bearer token",
        kind="Unauthorized",
    ),
    Case(
        "wrong-token",
        401,
        lambda s: _post(_rollout(s), token="nope"),
        headers={"WWW-Authenticate": "Bearer"},
        message="wrong bearer token",
    ),
    Case(
        "another-scheme",
        401,
        lambda s: {
            "method": "GET",
            "path": "/program",
            "headers": {"Authorization": f"Basic {TOKEN}"},
        },
        message="wrong bearer token",
    ),
    Case(
        "unknown-path",
        404,
        lambda s: {"method": "GET", "path": "/nope"},
        message="Not Found",
        kind="HTTPError",
    ),
    Case(
        "wrong-method",
        405,
        lambda s: {"method": "GET", "path": "/rollout"},
        headers={"Allow": "POST"},
        message="Method Not Allowed",
        kind="HTTPError",
    ),
    Case(
        "rate-limited",
        429,
        _seed("rate-limit"),
        SDKS,
        {"Retry-After": "7"},
        "rate limited by the test",
        "Retryable",
    ),
    Case("unavailable", 503, _seed("unavailable"), SDKS, {"Retry-After": "3"}, "warming up"),
    Case(
        "provider-429",
        429,
        _seed("provider-429"),
        SDKS,
        {"Retry-After": "5"},
        kind="RateLimitError",
    ),
    Case("provider-5xx", 503, _seed("provider-5xx"), SDKS, {"Retry-After": None}),
    Case("connection-refused", 503, _seed("connection"), SDKS, {"Retry-After": None}),
    Case("target-crash", 500, _seed("crash"), SDKS, message="the agent crashed"),
    Case(
        "student-rate-limit",
        429,
        lambda s: _post(_rollout(s, candidate={"system_prompt": "RATE-LIMIT-ME"})),
        ("node-readme",),
        {"Retry-After": "4"},
    ),
    Case(
        "bad-return-type",
        422,
        _seed("bad-type"),
        SDKS,
        {"Retry-After": None},
        "returned",
        "BadTargetResult",
    ),
    Case(
        "row-without-label", 422, _seed("no-label"), SDKS, message="expected", kind="MissingLabel"
    ),
    Case(
        "candidate-misuse",
        422,
        _seed("candidate-misuse"),
        SDKS,
        message="candidate.template needs a target declared with",
        kind="CandidateMisuse",
    ),
    Case(
        "user-mistake-of-the-agent",
        422,
        _seed("user-mistake"),
        SDKS,
        message="seed 'user-mistake' has no rubric; add a rubric column",
        kind="MissingRubric",
    ),
]


@pytest.mark.parametrize(
    ("case", "name"),
    [pytest.param(c, n, id=f"{c.id}-{n}") for c in CASES for n in c.servers],
)
def test_the_same_mistake_gets_the_same_answer(
    case: Case, name: str, start: Callable[[str], Server], schemas: dict[str, Any]
) -> None:
    server = start(name)
    answer = _send(server, **case.request(server))
    assert answer.status_code == case.status, answer.text
    _validate(schemas, "ErrorBody", answer.json())
    assert case.message in answer.json()["error"]["message"]
    if case.kind is not None:
        assert answer.json()["error"]["type"] == case.kind
    for header, value in case.headers.items():
        assert answer.headers.get(header) == value, header


@pytest.mark.parametrize("sdk", SDKS)
def test_template_rows_missing_a_field_are_422_and_broken_demos_score_zero(
    sdk: str, start: Callable[[str], Server], schemas: dict[str, Any]
) -> None:
    server = start(f"{sdk}-template")
    ok = _send(server, "POST", "/rollout", json=_rollout(server), headers=_auth())
    assert (ok.status_code, ok.json()["reward"]) == (200, 1.0)
    broken = _rollout(server, candidate={"system_prompt": "Add.", "demos": "not json"})
    answer = _send(server, "POST", "/rollout", json=broken, headers=_auth())
    assert answer.status_code == 200
    _validate(schemas, "RolloutResponse", answer.json())
    assert answer.json()["reward"] == 0.0 and "demos" in answer.json()["feedback"]
    missing = _send(
        server, "POST", "/rollout", json=_rollout(server, seed="t-missing"), headers=_auth()
    )
    assert missing.status_code == 422, missing.text
    _validate(schemas, "ErrorBody", missing.json())
    assert missing.json()["error"]["type"] == "TemplateMismatch"
    assert missing.json()["error"]["message"] == (
        "seed 't-missing': user_template 'Question: {question}' needs field(s) question but the "
        "row has: input, query; add the field(s) to the row or change the template's placeholders"
    )


@pytest.mark.parametrize("name", ALL)
def test_the_bearer_scheme_is_case_insensitive(name: str, start: Callable[[str], Server]) -> None:
    server = start(name)
    for header in (f"bearer {TOKEN}", f"BEARER  {TOKEN}"):
        answer = _send(server, "GET", "/program", headers={"Authorization": header})
        assert answer.status_code == 200, header
