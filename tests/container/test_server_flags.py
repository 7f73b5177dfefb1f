"""The flags both servers take (``container.server_flags``), through the real command line."""

from __future__ import annotations

import pytest

from optimizer.cli.main import build_parser, main


@pytest.mark.parametrize(
    ("command", "server", "port"),
    [(["container", "m"], "CONTAINER", "8100"), (["serve"], "SERVE", "8700")],
)
def test_both_servers_take_host_port_token_and_log_level_from_their_env(
    monkeypatch: pytest.MonkeyPatch, command: list[str], server: str, port: str
) -> None:
    for name in ("HOST", "PORT", "TOKEN"):
        monkeypatch.delenv(f"GEPA_{server}_{name}", raising=False)
    monkeypatch.delenv("GEPA_LOG_LEVEL", raising=False)
    args = build_parser().parse_args(command)
    assert (args.host, args.port, args.token, args.log_level) == ("127.0.0.1", port, None, "info")
    monkeypatch.setenv(f"GEPA_{server}_HOST", "0.0.0.0")
    monkeypatch.setenv(f"GEPA_{server}_PORT", "9001")
    monkeypatch.setenv(f"GEPA_{server}_TOKEN", "tok")
    monkeypatch.setenv("GEPA_LOG_LEVEL", "warning")
    args = build_parser().parse_args(command)
    assert (args.host, args.port, args.token, args.log_level) == (
        "0.0.0.0",
        "9001",
        "tok",
        "warning",
    )
    flags = build_parser().parse_args([*command, "--port", "0", "--token", "t2"])
    assert (flags.port, flags.token) == ("0", "t2")


@pytest.mark.parametrize("command", [["container", "tests.container.fixtures.toy"], ["serve"]])
@pytest.mark.parametrize(
    ("port", "message"),
    [("http", "--port / GEPA_{}_PORT must be a number, got 'http'"), ("70000", "0..65535")],
)
def test_a_port_that_is_no_port_is_named_before_anything_starts(
    capsys: pytest.CaptureFixture[str], command: list[str], port: str, message: str
) -> None:
    server = "CONTAINER" if command[0] == "container" else "SERVE"
    assert main([*command, "--port", port]) == 2
    assert message.format(server) in capsys.readouterr().err
