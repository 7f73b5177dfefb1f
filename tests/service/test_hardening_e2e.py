"""Hostile requests against ``gepa-runtime serve`` as a real process on 127.0.0.1."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from optimizer.cli import main
from tests.service.conftest import run_config
from tests.service.processes import announcement, serve_process

pytestmark = pytest.mark.e2e

MB = 1024 * 1024


def _peak_rss_kb(pid: int) -> int:
    """The process's peak resident set (``VmHWM``), in kB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


def _runs(url: str, token: str | None = None) -> list[dict[str, object]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url}/api/runs", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["runs"]  # type: ignore[no-any-return]


def test_serve_makes_up_a_token_and_prints_the_console_url_with_it(tmp_path: Path) -> None:
    with serve_process(tmp_path / "ws", make_token=True) as (url, proc):
        line, _ = announcement(proc)
        match = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=([A-Za-z0-9_-]{32,})", line)
        assert match, line
        console, token = match.groups()
        assert console == f"{url}/"
        assert httpx.get(f"{url}/api/runs").status_code == 401
        assert httpx.get(f"{console}?token={token}").status_code == 200  # the printed URL opens
        for scheme in ("Bearer", "bearer", "BEARER"):
            answer = httpx.get(f"{url}/api/runs", headers={"Authorization": f"{scheme} {token}"})
            assert answer.status_code == 200, scheme
        assert _runs(url, token) == []
    with serve_process(tmp_path / "ws", make_token=True) as (_, proc):
        again, _ = announcement(proc)
    assert token not in again  # a new one at each start


def test_the_cross_site_attack_of_the_issue_is_refused_even_without_a_token(
    tmp_path: Path, reflection_url: str
) -> None:
    with serve_process(tmp_path / "ws") as (url, proc):
        body = json.dumps({"config": run_config(reflection_url), "start": True})
        port = url.rsplit(":", 1)[1]
        attack = {
            "Content-Type": "text/plain",
            "Origin": "http://attacker.example",
            "Host": f"attacker.example:{port}",
        }
        assert httpx.post(f"{url}/api/runs", content=body, headers=attack).status_code == 403
        # Each of its three marks is enough on its own.
        foreign_host = {"Content-Type": "application/json", "Host": f"attacker.example:{port}"}
        foreign_origin = {"Content-Type": "application/json", "Origin": "http://attacker.example"}
        plain = {"Content-Type": "text/plain"}
        for headers, status in ((foreign_host, 403), (foreign_origin, 403), (plain, 415)):
            answer = httpx.post(f"{url}/api/runs", content=body, headers=headers)
            assert answer.status_code == status, (headers, answer.text)
            assert "error" in answer.json()
        assert _runs(url) == []
        # The service's own console page (its Origin) and plain HTTP clients still work.
        created = json.dumps({"config": run_config(reflection_url)})
        for headers in ({"Origin": url}, {}):
            own = httpx.post(
                f"{url}/api/runs",
                content=created,
                headers={"Content-Type": "application/json", **headers},
            )
            assert own.status_code == 201, own.text
        assert len(_runs(url)) == 2
        _, before = announcement(proc)
    assert "warning: --no-token" in before


def _sixty_megabytes() -> Iterator[bytes]:
    chunk = b" " * MB
    for _ in range(60):
        yield chunk


def _valid_config_of(size: int) -> bytes:
    """A run config that would be stored as it is, padded to ``size`` bytes."""
    head = b'{"config": {"containers": ["http://127.0.0.1:9"], "reflection_model": "m", '
    return head + b'"task_model": "' + b"x" * (size - len(head) - 19) + b'"}}'


def test_a_60_mb_body_is_refused_and_never_held_in_memory(tmp_path: Path) -> None:
    with serve_process(tmp_path / "ws") as (url, proc):
        peak_before = _peak_rss_kb(proc.pid)
        sized = httpx.post(
            f"{url}/api/runs",
            content=_valid_config_of(60 * MB),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert sized.status_code == 413, sized.text[:300]
        assert "--max-body-bytes" in sized.json()["error"]["message"]
        chunked = httpx.post(
            f"{url}/api/runs",
            content=_sixty_megabytes(),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert chunked.status_code == 413, chunked.text[:300]
        assert _runs(url) == []
        grown_mb = (_peak_rss_kb(proc.pid) - peak_before) / 1024
    assert grown_mb < 20, f"the service's peak memory grew by {grown_mb:.0f} MB"
    assert not list((tmp_path / "ws").glob("runs/*"))


def test_the_token_stays_out_of_the_access_log(tmp_path: Path) -> None:
    token = "tok-access-log-9f8e7d"
    extra = ["--log-level", "info"]
    with serve_process(tmp_path / "ws", token=token, extra=extra) as (url, proc):
        assert httpx.get(f"{url}/?token={token}").status_code == 200
        assert httpx.get(f"{url}/api/runs?limit=5&token={token}&x=1").status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.stdout is not None
        log = proc.stdout.read().decode()
    assert '"GET /?token=*** HTTP/1.1" 200' in log, log
    assert "/api/runs?limit=5&token=***&x=1" in log
    assert token not in log


def test_serve_answers_only_to_its_own_host_and_port_and_allowed_hosts(tmp_path: Path) -> None:
    extra = ["--allowed-host", "console.box.test"]
    with serve_process(tmp_path / "ws", extra=extra) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        for host, status in (
            (f"127.0.0.1:{port}", 200),
            (f"localhost:{port}", 200),
            (f"console.box.test:{port}", 200),  # the operator's name, at any port
            (f"localhost:{port + 1}", 403),  # a loopback name, but another port's origin
            (f"rebind.attacker.test:{port}", 403),
        ):
            answer = httpx.get(f"{url}/api/health", headers={"Host": host})
            assert answer.status_code == status, host
        refused = httpx.get(f"{url}/", headers={"Host": f"rebind.attacker.test:{port}"})
        message = refused.json()["error"]["message"]
        assert f"localhost:{port}" in message and "--allowed-host" in message


def test_bad_serve_flags_name_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEPA_SERVE_TOKEN", raising=False)
    ws = ["--workspace", str(tmp_path / "ws"), "--port", "0"]
    assert main(["serve", *ws, "--no-token", "--token", "abc"]) == 2
    assert "--no-token and --token" in capsys.readouterr().err
    assert main(["serve", *ws, "--allow-modules", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["serve", *ws, "--max-body-bytes", "10"]) == 2
    assert "--max-body-bytes must be at least 1024" in capsys.readouterr().err
