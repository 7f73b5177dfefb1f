"""Credentials never reach the database, whatever path they take."""

from __future__ import annotations

import json
from pathlib import Path

from schemas import RunConfig
from workspace import Workspace, scrub, scrub_text
from workspace.redact import may_hold_secret

SECRETS = (
    "tok-CONTAINER-4f9a2b",
    "sk-proj-abcdefghijklmnop123456",
    "hunter2-password-value",
    "bearer-secret-abcdef",
    "cookie-session-998877",
)


def test_scrub_masks_sensitive_keys_at_any_depth_and_keeps_counts() -> None:
    data = {
        "API_KEY": "x1",
        "openaiApiKey": "x2",
        "nested": [{"Authorization": "Basic abc"}, {"client_secret": {"v": "x3", "n": 4}}],
        "db": {"password": "x4", "user": "me"},
        "usage": {"input_tokens": 12, "output_tokens": 3, "max_tokens": None},
        "reflection_api_key_env": "OPENAI_API_KEY",
        "token_env": "sk-not-a-name-but-a-key-123456",
        "note": "plain text",
        "empty_token": "",
    }
    assert scrub(data) == {
        "API_KEY": "***",
        "openaiApiKey": "***",
        "nested": [{"Authorization": "***"}, {"client_secret": {"v": "***", "n": 4}}],
        "db": {"password": "***", "user": "me"},
        "usage": {"input_tokens": 12, "output_tokens": 3, "max_tokens": None},
        "reflection_api_key_env": "OPENAI_API_KEY",
        "token_env": "***",
        "note": "plain text",
        "empty_token": "",
    }
    assert data["db"]["password"] == "x4"  # a copy; the caller's dict is untouched


def test_scrub_text_masks_bearer_tokens_and_sk_keys() -> None:
    text = "got 401 with Authorization: Bearer abc.def-123 using sk-proj-abcdefghijklmnop123456"
    assert scrub_text(text) == "got 401 with Authorization: Bearer *** using sk-***"
    assert scrub_text("AUTHORIZATION: BEARER abcdef123") == "AUTHORIZATION: BEARER ***"
    assert scrub_text("the bearer of bad news") == "the bearer of bad news"
    assert scrub_text("sk-learn is a library") == "sk-learn is a library"


async def test_no_secret_reaches_the_database_files(tmp_path: Path, rollout) -> None:
    config = RunConfig(containers=["http://127.0.0.1:9"], container_token=SECRETS[0])
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.create_run(config)
        assert run.config["container_token"] == "***"
        await ws.update_run(
            run.run_id,
            state={"proposer": {"api_key": SECRETS[1]}, "db": [{"password": SECRETS[2]}]},
            error=f"401: Authorization: Bearer {SECRETS[3]}",
        )
        await ws.append_event(
            run.run_id, "request", {"headers": {"Cookie": SECRETS[4], "x-api-key": SECRETS[1]}}
        )
        record = rollout(
            "s1",
            run_id=run.run_id,
            status="error",
            trace={"http": {"headers": {"authorization": f"Bearer {SECRETS[3]}"}}},
        )
        record = record.model_copy(
            update={"error": f"upstream said: Bearer {SECRETS[3]} is invalid ({SECRETS[1]})"}
        )
        [rollout_id] = await ws.record_rollouts([record])
        stored = await ws.get_rollout(rollout_id)
        assert stored.trace == {"http": {"headers": {"authorization": "***"}}}
        assert stored.error == "upstream said: Bearer *** is invalid (sk-***)"
        again = await ws.get_run(run.run_id)
        assert again.state == {"proposer": {"api_key": "***"}, "db": [{"password": "***"}]}
        assert again.config["reflection_api_key_env"] == "OPENAI_API_KEY"
        # Check the files while the WAL still holds the fresh writes, and after checkpoint.
        _assert_no_secret(tmp_path / "ws")
    _assert_no_secret(tmp_path / "ws")


def _assert_no_secret(root: Path) -> None:
    files = [p for p in root.iterdir() if p.name.startswith("workspace.sqlite")]
    assert files
    for path in files:
        raw = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in raw, f"{secret} found in {path.name}"


def test_may_hold_secret_is_a_superset_of_what_scrub_masks() -> None:
    cases = [
        {"messages": [{"role": "user", "content": "hello"}]},
        {"Headers": {"X-Api-Key": "k"}},
        {"m": "BEARER abcdef12345"},
        {"m": "key sk-abcdefghijklmnopqrst"},
        {"usage": {"input_tokens": 3}},
    ]
    for value in cases:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if scrub(value) != value:
            assert may_hold_secret(text), value
    assert not may_hold_secret(json.dumps(cases[0]))
    assert may_hold_secret(json.dumps(cases[4]))  # conservative: "tokens" triggers a walk
