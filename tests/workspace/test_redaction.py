"""Credentials never reach the database, whatever path they take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas import RunConfig
from workspace import Workspace, scrub, scrub_text
from workspace.redact import Scrubber, may_hold_secret

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


KNOWN = "Zq81-correct-horse-battery"  # a key with no recognisable shape


def test_a_known_secret_is_masked_whatever_it_looks_like() -> None:
    scrubber = Scrubber([KNOWN, None, "", "short"])
    echoed = f"Error code: 401 - Incorrect API key provided: {KNOWN}. See your dashboard."
    assert scrubber.text(echoed) == (
        "Error code: 401 - Incorrect API key provided: ***. See your dashboard."
    )
    # Inside JSON text a secret with quotes or backslashes is escaped: masked there too.
    odd = 'p"a\\ss-w0rd-123'
    scrubber.add(odd)
    assert odd not in scrubber.text(json.dumps({"m": f"got {odd}"}))
    assert json.dumps(odd)[1:-1] not in scrubber.text(json.dumps({"m": f"got {odd}"}))
    assert scrubber.value({"nested": [f"x{KNOWN}y"], "n": 3}) == {"nested": ["x***y"], "n": 3}
    # Values under 8 characters are not registered: they would mask ordinary words.
    assert scrubber.text("a short story") == "a short story"
    assert scrubber.may_hold_secret(f'{{"m": "{KNOWN}"}}')
    assert not Scrubber().may_hold_secret(f'{{"m": "{KNOWN}"}}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pa55@10.0.0.1:8000/v1", "http://***@10.0.0.1:8000/v1"),
        ("see https://bob@example.com/x", "see https://***@example.com/x"),
        ("https://h/v1?api-key=abc123&x=1", "https://h/v1?api-key=***&x=1"),
        ("GET /runs?token=zzz HTTP/1.1", "GET /runs?token=*** HTTP/1.1"),
        ("https://h/a?key=k1&sig=s2#top", "https://h/a?key=***&sig=***#top"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic ***"),
        ("use ghp_abcdefghijklmnopqrstuvwxyz0123 now", "use ghp_*** now"),
        ("id AKIAABCDEFGHIJKLMNOP here", "id AKIA*** here"),
        ("hf_abcdefghijklmnopqrstuvwx", "hf_***"),
        (
            "Incorrect API key provided: abcd1234efgh5678ijkl9012mnop. Find it online",
            "Incorrect API key provided: ***. Find it online",
        ),
        ('{"api_key": "AbCdEf0123456789GhIjKl"}', '{"api_key": "***"}'),
        ("X-Token=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "X-Token=***"),
    ],
)
def test_scrub_text_masks_credentials_it_recognises(text: str, expected: str) -> None:
    assert scrub_text(text) == expected


def test_scrub_text_leaves_look_alikes_alone() -> None:
    # A guard for the patterns above (it passes on code without them): counts, words
    # after "key"/"token" that are not key-shaped, plain URLs and e-mail addresses.
    ordinary = [
        "input_tokens: 12345678901234567890123",
        "the key idea is simple",
        "a monkey: abcdefgh1234567890abcdef",
        "token budget exhausted_after_many_steps",
        "https://example.com/path?page=2",
        "mail me at bob@example.com",
        "the bearer of bad news",
        "sk-learn is a library",
    ]
    assert [scrub_text(text) for text in ordinary] == ordinary


async def test_the_workspace_masks_the_secrets_it_was_told_everywhere(
    tmp_path: Path, rollout
) -> None:
    url = "http://admin:pa55word-XYZ@127.0.0.1:9"
    config = RunConfig(containers=[url], reflection_base_url=f"{url}/v1?api-key=qwertyuiop")
    async with Workspace(tmp_path / "ws") as ws:
        ws.scrubber.add(KNOWN)
        run = await ws.create_run(config)
        assert run.config["containers"] == ["http://***@127.0.0.1:9"]
        assert run.config["reflection_base_url"] == "http://***@127.0.0.1:9/v1?api-key=***"
        await ws.update_run(run.run_id, error=f"Incorrect API key provided: {KNOWN}")
        await ws.append_event(run.run_id, "phase", {"phase": "failed", "error": f"k={KNOWN}"})
        record = rollout("s1", run_id=run.run_id, trace={"messages": [{"content": KNOWN}]})
        record = record.model_copy(update={"feedback": f"echo {KNOWN}"})
        [rollout_id] = await ws.record_rollouts([record])
        assert (await ws.get_rollout(rollout_id)).trace == {"messages": [{"content": "***"}]}
        assert (await ws.get_run(run.run_id)).error == "Incorrect API key provided: ***"
        _assert_absent(tmp_path / "ws", (KNOWN, "pa55word-XYZ", "qwertyuiop"))
    _assert_absent(tmp_path / "ws", (KNOWN, "pa55word-XYZ", "qwertyuiop"))


def _assert_absent(root: Path, secrets: tuple[str, ...]) -> None:
    for path in root.iterdir():
        if path.name.startswith("workspace.sqlite"):
            raw = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in raw, f"{secret} found in {path.name}"


async def test_an_event_is_stored_as_given_unless_its_text_may_hold_a_secret(
    tmp_path: Path,
) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        ws.scrubber.add(KNOWN)
        run = await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))
        plain = {"trials": [{"seed": "s1", "reward": 0.5, "feedback": "wrong queue"}]}
        leaky = {"trials": [{"seed": "s2", "feedback": f"echo {KNOWN}"}], "x": {"token": "t0k3n"}}
        first = await ws.append_event(run.run_id, "trials", plain)
        second = await ws.append_event(run.run_id, "trials", leaky)
        assert first.data == plain
        masked = {"trials": [{"seed": "s2", "feedback": "echo ***"}], "x": {"token": "***"}}
        assert second.data == masked
        stored = await ws.events_since(run.run_id)
        assert [e.data for e in stored if e.type == "trials"] == [plain, masked]
    _assert_absent(tmp_path / "ws", (KNOWN, "t0k3n"))
