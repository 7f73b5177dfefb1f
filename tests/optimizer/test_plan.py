"""The run plan (pure): any budget of one call or more runs, and says what it skipped."""

from __future__ import annotations

import random

import pytest

from optimizer.runtime.accounts.plan import MIN_HOLDOUT, default_proposals_in_flight, plan_run
from proposer.client import run_reflection_is_local
from schemas import RunConfig

TRAIN = [f"t{i}" for i in range(24)]
HOLDOUT = [f"h{i}" for i in range(36)]
VAL = [f"v{i}" for i in range(10)]


def _plan(limit: int | None, val: list[str] | None = None, seed: int = 0):  # type: ignore[no-untyped-def]
    return plan_run(
        limit, train=TRAIN, holdout=HOLDOUT, val=val or [], top_k=3, rng=random.Random(seed)
    )


@pytest.mark.parametrize("limit", [None, 372, 120])
def test_a_budget_for_a_full_run_skips_nothing(limit: int | None) -> None:
    plan = _plan(limit)
    assert plan.search and not plan.skipped
    assert plan.train == tuple(TRAIN) and plan.holdout == tuple(HOLDOUT)
    assert plan.selection_split == "train"


def test_val_seeds_choose_the_winner_when_the_budget_pays_for_them() -> None:
    plan = _plan(200, VAL)
    assert plan.selection_split == "val" and plan.top_k == 3 and not plan.skipped
    fewer = _plan(150, VAL)  # 24 + 36 + 24 + 36 = 120; 30 left: (k + 1) * 10 -> k = 2
    assert fewer.top_k == 2 and "2 instead of 3" in fewer.skipped[0]
    none = _plan(125, VAL)
    assert none.selection_split == "train" and "no val selection" in none.skipped[0]


def test_holdout_is_subsampled_before_the_search_is_given_up() -> None:
    plan = _plan(100)  # 24 + 24 + 2h <= 100 -> h = 26
    assert plan.search and len(plan.holdout) == 26
    assert set(plan.holdout) <= set(HOLDOUT)
    assert list(plan.holdout) == [h for h in HOLDOUT if h in plan.holdout]  # program order
    assert plan.skipped == ("holdout subsampled to 26 of 36 seeds",)
    assert _plan(100).holdout == plan.holdout  # the same seed draws the same seeds
    assert len(_plan(24 + 24 + 2 * MIN_HOLDOUT).holdout) == MIN_HOLDOUT


def test_below_a_search_only_the_baseline_is_scored() -> None:
    plan = _plan(60)
    assert not plan.search and len(plan.train) == 24 and len(plan.holdout) == 36
    assert "no search" in plan.skipped[0] and "not evaluated" in plan.skipped[0]


@pytest.mark.parametrize(("limit", "train", "holdout"), [(1, 1, 0), (2, 1, 1), (10, 4, 6)])
def test_tiny_budgets_score_the_baseline_on_what_they_pay_for(
    limit: int, train: int, holdout: int
) -> None:
    plan = _plan(limit)
    assert not plan.search
    assert (len(plan.train), len(plan.holdout)) == (train, holdout)
    assert len(plan.train) + len(plan.holdout) == limit
    assert f"baseline scored on {train} of 24 train seeds" in plan.skipped
    assert f"baseline scored on {holdout} of 36 holdout seeds" in plan.skipped


@pytest.mark.parametrize(
    ("model", "url", "expected"),
    [
        ("gpt-4.1-mini", None, 4),
        ("openai/gpt-4.1-mini", "https://api.openai.com/v1", 4),
        ("openrouter/anthropic/claude-sonnet-4", None, 4),
        ("reflection", "http://127.0.0.1:8013/v1", 1),
        ("reflection", "http://localhost:8080/v1", 1),
        ("reflection", "http://[::1]:8013/v1", 1),
        ("ollama/qwen2.5-coder:1.5b", None, 1),  # routed to the local Ollama
    ],
)
def test_default_proposals_in_flight_follow_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, model: str, url: str | None, expected: int
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = RunConfig(reflection_model=model, reflection_base_url=url)
    assert default_proposals_in_flight(run_reflection_is_local(config)) == expected
    # Said outright (--reflection-endpoint), the kind wins over the URL.
    for kind, writers in (("local", 1), ("hosted", 4)):
        said = config.model_copy(update={"reflection_endpoint": kind})
        assert default_proposals_in_flight(run_reflection_is_local(said)) == writers


def test_an_openai_model_sent_to_a_local_server_counts_as_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8013/v1")
    assert run_reflection_is_local(RunConfig(reflection_model="gpt-4.1-mini"))
    # An external proposer command has no model to route: its base URL (none: hosted) decides.
    command = RunConfig(reflection_model="gpt-4.1-mini", proposer_command="agent --run")
    assert not run_reflection_is_local(command)


def test_the_endpoint_kind_is_a_flag_and_a_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from optimizer.cli import build_parser
    from optimizer.cli.flags import config_from_args

    local = ["optimize", "run", "--container", "http://c", "--reflection-model", "reflection",
             "--reflection-base-url", "http://127.0.0.1:8013/v1"]  # fmt: skip
    monkeypatch.delenv("GEPA_REFLECTION_ENDPOINT", raising=False)
    config = config_from_args(build_parser().parse_args(local))
    assert config.reflection_endpoint == "auto" and run_reflection_is_local(config)
    # A simulated or self-hosted big model on this machine that serves many requests at once:
    config = config_from_args(
        build_parser().parse_args([*local, "--reflection-endpoint", "hosted"])
    )
    assert not run_reflection_is_local(config)
    monkeypatch.setenv("GEPA_REFLECTION_ENDPOINT", "hosted")
    assert config_from_args(build_parser().parse_args(local)).reflection_endpoint == "hosted"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*local, "--reflection-endpoint", "remote"])
    assert "choose from 'auto', 'local', 'hosted'" in capsys.readouterr().err
