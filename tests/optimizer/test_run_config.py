"""A run's config through its life (``optimizer.runtime.lifecycle.run_config``): new, stored,
resumed."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from optimizer.runtime.accounts.plan import plan_run
from optimizer.runtime.lifecycle.run_config import (
    budget_warning,
    executed_config,
    metric_call_limit,
    new_config,
    plan_event,
    resumed_config,
    serving_config,
    stored_config,
)
from schemas import Program, RunConfig, Seeds, UserError
from workspace import Workspace

TOKEN = "container-token-0123456789"


def _config(**extra: object) -> RunConfig:
    return RunConfig.model_validate(
        {"containers": ["http://127.0.0.1:9"], "reflection_model": "fake", **extra}
    )


def test_a_new_run_gets_auto_light_only_when_it_names_no_budget() -> None:
    assert new_config(_config()).auto == "light"
    given = new_config(_config(max_metric_calls=40))
    assert given.auto is None and given.max_metric_calls == 40


def test_a_new_module_run_has_its_existing_paths_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rows.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    config = new_config(
        RunConfig(
            module="examples.banking77.main",  # a dotted name: no file, left as it is
            dataset="rows.jsonl",
            verifier="exact",  # a built-in name, not a file
            reflection_model="fake",
            max_metric_calls=10,
        )
    )
    assert config.dataset == os.path.join(tmp_path.resolve(), "rows.jsonl")
    assert config.module == "examples.banking77.main" and config.verifier == "exact"


async def test_the_token_stored_as_a_mask_comes_back_only_when_given(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        record = await ws.create_run(_config(container_token=TOKEN, max_metric_calls=10))
        assert record.config["container_token"] == "***"
        assert stored_config(record).container_token is None
        resumed = resumed_config(ws, record, RunConfig(container_token=TOKEN))
        assert resumed.container_token is not None
        assert resumed.container_token.get_secret_value() == TOKEN
        assert resumed.max_metric_calls == 10 and resumed.containers == ["http://127.0.0.1:9"]
        moved = resumed_config(ws, record, RunConfig(containers=["http://127.0.0.1:10"]))
        assert moved.containers == ["http://127.0.0.1:10"] and moved.container_token is None


async def test_a_stored_config_that_no_longer_validates_names_the_field(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        record = await ws.create_run(_config(max_metric_calls=10))
        broken = record.model_copy(update={"config": {**record.config, "concurrency": 0}})
        with pytest.raises(UserError, match=r"run .* is not valid any more \(concurrency: "):
            resumed_config(ws, broken, None)
        done = record.model_copy(update={"status": "completed"})
        with pytest.raises(UserError, match="already completed"):
            resumed_config(ws, done, None)


def test_a_served_module_config_points_at_its_url_alone() -> None:
    module = RunConfig(module="pkg.app", dataset="/data/rows.jsonl", reflection_model="fake")
    served = serving_config(module, "http://127.0.0.1:5000")
    assert served.containers == ["http://127.0.0.1:5000"]
    assert served.module is None and served.dataset is None and served.reflection_model == "fake"


def test_proposals_in_flight_default_to_where_the_reflection_model_runs() -> None:
    local = _config(reflection_base_url="http://127.0.0.1:8013/v1", reflection_endpoint="local")
    hosted = _config(reflection_endpoint="hosted")
    assert executed_config(local).proposals_in_flight == 1
    assert executed_config(hosted).proposals_in_flight == 4
    assert executed_config(_config(proposals_in_flight=2)).proposals_in_flight == 2


def test_the_program_event_describes_the_budget_and_the_plan() -> None:
    seeds = Seeds(train=[f"t{i}" for i in range(6)], holdout=["h0", "h1"])
    program = Program.model_validate(
        {
            "program_id": "p",
            "fingerprint": "f",
            "components": [{"name": "system_prompt", "kind": "prompt", "text": "hi"}],
            "seeds": seeds.model_dump(),
        }
    )
    config = executed_config(_config(auto="light"))
    limit = metric_call_limit(config, seeds)
    plan = plan_run(
        limit, train=seeds.train, holdout=seeds.holdout, val=[], top_k=0, rng=random.Random(0)
    )
    event = plan_event(config, program, plan, limit)
    assert event["budget"] == {"max_metric_calls": limit, "max_cost_usd": None, "auto": "light"}
    assert event["seeds"] == {"train": 6, "val": 0, "holdout": 2} and event["plan"]["search"]
    assert budget_warning(config, seeds, limit) is None  # far below the large-budget line
    explicit = _config(auto="light", max_metric_calls=30)
    assert plan_event(explicit, program, plan, 30)["budget"]["auto"] is None
    with pytest.raises(UserError, match="no budget"):
        metric_call_limit(_config(), seeds)
