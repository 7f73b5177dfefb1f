"""``run_check`` against the toy target served in this process (``--module``), cache first.

The toy agent answers an item's label only when the prompt names it, so a prompt that names
the labels beats one that does not, seed by seed. ``$TOY_LOG`` counts the rollouts it served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.regression import CheckSpec, check_json, check_markdown, run_check
from optimizer.searches import run_stored
from optimizer.testing import (
    TOY_CONTAINER,
    TOY_DATA,
    TOY_SPLITS,
    reflection_app,
    rollout_calls,
    thread_server,
)
from schemas import RunConfig, UserError
from workspace import Workspace

LABELS = "ant, bee, cat, cow, dog, eel, elk, fox, hen, owl, pig, yak"
GOOD = f"Answer with the label. Known labels: {LABELS}."
HALF = "Answer with the label. Known labels: ant, bee, cat, cow, dog, eel."
DAMAGED = "Answer with the label."  # the label list removed


def _toy() -> RunConfig:
    return RunConfig(
        module=str(TOY_CONTAINER),
        dataset=str(TOY_DATA),
        splits_file=str(TOY_SPLITS),
    )


@pytest.fixture()
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("TOY_LOG", str(log))
    return log


@pytest.fixture()
def prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    for name, text in (("good", GOOD), ("half", HALF), ("damaged", DAMAGED)):
        (folder / f"{name}.txt").write_text(text + "\n")
    return folder


@pytest.fixture(scope="module")
def reflection() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


async def _check(ws_root: Path, **fields: object) -> object:
    async with Workspace(ws_root) as ws:
        return await run_check(CheckSpec(**{"source": _toy(), **fields}), ws)  # type: ignore[arg-type]


async def test_checking_the_same_pair_twice_pays_nothing_the_second_time(
    tmp_path: Path, calls: Path, prompts: Path
) -> None:
    first = await _check(tmp_path / "ws", candidate=str(prompts / "half.txt"))
    assert first.paid == 24 and first.cached == 0 and len(rollout_calls(calls)) == 24
    second = await _check(tmp_path / "ws", candidate=str(prompts / "half.txt"))
    assert second.paid == 0 and second.cached == 24 and len(rollout_calls(calls)) == 24
    assert second.verdict == first.verdict
    # Half the labels named against none: better on the 6 holdout seeds it names.
    assert first.verdict.n == 12 and first.verdict.wins == 6 and first.verdict.losses == 0
    assert first.passed and first.verdict.lift == 0.5


async def test_a_damaged_prompt_fails_against_the_good_one_and_a_margin_is_a_tolerance(
    tmp_path: Path, calls: Path, prompts: Path
) -> None:
    spec = {"candidate": str(prompts / "damaged.txt"), "reference": str(prompts / "good.txt")}
    failed = await _check(tmp_path / "ws", **spec)
    assert not failed.passed and failed.verdict.ci_high < 0 and failed.verdict.losses == 12
    tolerated = await _check(tmp_path / "ws", margin=1.0, **spec)
    assert tolerated.passed and tolerated.paid == 0
    report = check_json(failed)
    assert report["passed"] is False and report["exit_code"] == 1
    assert report["per_seed"]["cow-2"] == {"reference": 1.0, "candidate": 0.0}
    markdown = check_markdown(failed)
    assert markdown.startswith("### gepa-runtime check: FAILED")
    assert "-Answer with the label. Known labels:" in markdown  # the diff, reference -> candidate


async def test_misses_over_the_budget_are_refused_before_any_rollout(
    tmp_path: Path, calls: Path, prompts: Path
) -> None:
    with pytest.raises(
        UserError, match=r"needs 24 paid rollouts \(0 of 24 are cached\).*raise it to 24"
    ):
        await _check(tmp_path / "ws", candidate=str(prompts / "good.txt"), max_metric_calls=23)
    assert rollout_calls(calls) == []
    # What is cached is free: with the reference paid for, the candidate fits in 12.
    await _check(tmp_path / "ws", candidate="baseline", max_metric_calls=12)
    done = await _check(tmp_path / "ws", candidate=str(prompts / "good.txt"), max_metric_calls=12)
    assert done.paid == 12 and done.cached == 12


async def test_the_same_text_on_both_sides_is_sent_once_and_ties(
    tmp_path: Path, calls: Path
) -> None:
    result = await _check(tmp_path / "ws", candidate="baseline", split="train")
    assert result.paid == 24 and len(rollout_calls(calls)) == 24  # 24 train seeds, one text
    assert result.passed and (result.verdict.lift, result.verdict.ci_high) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "name the candidate to check"),
        ({"candidate": "best"}, "`best` is the best candidate of a run: pass --run RUN_ID"),
        ({"candidate": '{"instructions": "x"}'}, "missing system_prompt; unknown instructions"),
        ({"candidate": "nope.txt"}, "no file, candidate id or side a check knows"),
        (
            {"candidate": "0123456789abcdef"},
            "no run of the workspace .* has a candidate 0123456789abcdef",
        ),
        (
            {"candidate": "baseline", "split": "val"},
            "has no val seeds: pass --split with a split it has",
        ),
    ],
)
async def test_usage_errors_name_the_fix(
    tmp_path: Path, calls: Path, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        await _check(tmp_path / "ws", **fields)
    assert rollout_calls(calls) == []


async def test_no_container_is_a_usage_error(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        with pytest.raises(UserError, match="no task container: pass --container URL"):
            await run_check(CheckSpec(candidate="baseline"), ws)


async def test_a_runs_best_against_its_baseline_repeats_its_promotion_from_the_cache(
    tmp_path: Path, calls: Path, reflection: str
) -> None:
    config = _toy().model_copy(
        update={
            "reflection_model": "fake-reflection",
            "reflection_base_url": reflection,
            "proposer_mode": "text",
            "max_metric_calls": 110,  # a few proposals: the best names some labels, not all
            "minibatch_size": 4,
            "use_merge": False,
            "seed": 4,
        }
    )
    async with Workspace(tmp_path / "ws") as ws:  # the module served in this process
        result = await run_stored(ws, (await ws.create_run(config)).run_id, secrets=config)
    promotion = result.evidence["promotion"]
    assert promotion["promoted"] and promotion["ci_low"] < promotion["ci_high"]  # a real interval
    paid = len(rollout_calls(calls))
    # Neither the container nor the seed is given: both are the run's.
    checked = await _check(tmp_path / "ws", source=RunConfig(), run_id=result.run_id)
    assert len(rollout_calls(calls)) == paid and checked.paid == 0
    verdict = checked.verdict
    assert (verdict.lift, verdict.ci_low, verdict.ci_high, verdict.n) == (
        promotion["lift"],
        promotion["ci_low"],
        promotion["ci_high"],
        promotion["n"],
    )
    assert checked.recorded is not None and checked.drift == 0.0
    assert checked.seed == 4 and "run " + result.run_id in checked.seeds_from
    # The container changed since (another verifier that scores the toy alike): everything is
    # scored again on it, the report says why, and a lift that held is no drift.
    changed = _toy().model_copy(update={"verifier": "exact"})
    again = await _check(tmp_path / "ws", source=changed, run_id=result.run_id)
    assert again.paid == 2 * promotion["n"] and len(rollout_calls(calls)) == paid + again.paid
    assert any("the container changed since run" in w for w in again.warnings)
    assert again.drift == 0.0
    # A candidate of the run by id, from anywhere in the workspace.
    by_id = await _check(tmp_path / "ws", candidate=result.best_candidate_id)
    assert by_id.candidate.components == result.evidence["best"]["components"]
    assert json.dumps(check_json(checked))  # JSON-ready
