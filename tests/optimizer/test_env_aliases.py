"""The product docs' environment variable names, and one name for the student model."""

from __future__ import annotations

import pytest

from optimizer.cli import build_parser
from optimizer.cli.flags import config_from_args
from schemas import UserError
from schemas.env import read_env

DOC_ENV = {
    "ROLLOUT_GEPA_REFLECTION_MODEL": "openai/gpt-4.1-mini",
    "ROLLOUT_GEPA_STUDENT_MODEL": "openai/gpt-4.1-nano",
    "ROLLOUT_GEPA_CONCURRENCY": "8",
}


def _config(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *flags: str):  # type: ignore[no-untyped-def]
    for name in ("GEPA_REFLECTION_MODEL", "GEPA_STUDENT_MODEL", "GEPA_TASK_MODEL",
                 "GEPA_CONCURRENCY", *DOC_ENV):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["optimize", "run", "--container", "http://c", *flags])
    return config_from_args(args)


def test_the_docs_variables_set_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch, DOC_ENV)
    assert config.reflection_model == "openai/gpt-4.1-mini"
    assert config.task_model == "openai/gpt-4.1-nano" and config.concurrency == 8
    assert _config(monkeypatch, DOC_ENV, "--concurrency", "2").concurrency == 2  # flag wins


def test_the_student_model_has_one_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _config(monkeypatch, {"GEPA_STUDENT_MODEL": "s"}).task_model == "s"
    assert capsys.readouterr().err == ""
    assert _config(monkeypatch, {"GEPA_TASK_MODEL": "old"}).task_model == "old"
    assert "GEPA_TASK_MODEL is deprecated: set GEPA_STUDENT_MODEL" in capsys.readouterr().err
    # the same value under both names is no conflict
    assert (
        _config(monkeypatch, {"GEPA_STUDENT_MODEL": "s", "GEPA_TASK_MODEL": "s"}).task_model == "s"
    )


def test_two_names_with_different_values_are_an_error_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UserError, match=r"GEPA_CONCURRENCY='4', ROLLOUT_GEPA_CONCURRENCY='8'"):
        _config(monkeypatch, {"GEPA_CONCURRENCY": "4", "ROLLOUT_GEPA_CONCURRENCY": "8"})
    with pytest.raises(UserError, match=r"GEPA_STUDENT_MODEL='a', GEPA_TASK_MODEL='b'"):
        _config(monkeypatch, {"GEPA_STUDENT_MODEL": "a", "GEPA_TASK_MODEL": "b"})


def test_secret_values_are_not_shown_in_a_conflict() -> None:
    env = {"GEPA_SERVE_TOKEN": "tok-one-secret", "ROLLOUT_API_KEY": "tok-two-secret"}
    with pytest.raises(UserError) as info:
        read_env("GEPA_SERVE_TOKEN", env)
    assert "GEPA_SERVE_TOKEN, ROLLOUT_API_KEY" in str(info.value)
    assert "secret" not in str(info.value)
    assert read_env("GEPA_SERVER", {"ROLLOUT_BASE_URL": "http://127.0.0.1:8700"}) == (
        "http://127.0.0.1:8700"
    )
