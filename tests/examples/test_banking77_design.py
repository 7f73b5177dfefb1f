"""The Banking77 design: the flags the main job and the race derive from it mean what it says."""

from __future__ import annotations

from dataclasses import replace

from examples.banking77.design import DESIGN
from optimizer.cli.flags import config_from_args
from optimizer.cli.main import build_parser
from optimizer.runtime.accounts.budget import resolve_metric_calls
from schemas import RunConfig


def _run_config(*flags: str) -> RunConfig:
    """What ``optimize run`` makes of ``flags`` (the real parser)."""
    base = ["optimize", "run", "--container", "http://127.0.0.1:9", "--reflection-model", "r"]
    return config_from_args(build_parser().parse_args([*base, *flags]))


def test_the_local_flags_set_every_field_of_the_design() -> None:
    design = replace(
        DESIGN,
        concurrency=3,
        proposals_in_flight=2,
        reflection_max_tokens=512,
        max_prompt_chars=1234,
        max_idle_iterations=5,
        patience=7,
        minibatch_size=6,
    )
    config = _run_config(*design.local_args())
    assert config.concurrency == 3
    assert config.proposals_in_flight == 2
    assert config.reflection_max_tokens == 512
    assert config.max_prompt_chars == 1234
    assert config.max_idle_iterations == 5
    assert config.patience == 7
    assert config.minibatch_size == 6


def test_the_race_budget_is_the_one_the_main_job_flags_give() -> None:
    auto = replace(DESIGN, max_metric_calls=None)
    config = _run_config("--auto", auto.auto, "--minibatch-size", str(auto.minibatch_size))
    for train, holdout in ((24, 40), (54, 297), (77, 154)):
        expected = resolve_metric_calls(config, train=train, holdout=holdout, val=0)
        assert auto.metric_calls(train=train, holdout=holdout) == expected
    fixed = replace(DESIGN, max_metric_calls=123)
    assert fixed.metric_calls(train=24, holdout=40) == 123
    config = _run_config("--max-metric-calls", str(DESIGN.max_metric_calls))
    assert DESIGN.metric_calls(train=54, holdout=297) == config.max_metric_calls


def test_the_container_flags_carry_the_split_sizes_intents_and_seed() -> None:
    design = replace(DESIGN, train_size=11, holdout_size=22, intents="cards")
    assert design.container_args(seed=3) == [
        "--train-size", "11", "--holdout-size", "22", "--intents", "cards", "--seed", "3",
    ]  # fmt: skip
