"""MLflow tracking without a server: the event mapping, the params, the URI, the CLI flag,
and a run whose tracking cannot start. The real server is in tests/e2e/test_mlflow_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import optimizer.runtime.tracking.tracker as tracking
from optimizer.cli import build_parser
from optimizer.cli.flags import config_from_args
from optimizer.cli.optimize import check_runnable
from optimizer.runtime.tracking.ops import (
    Artifact,
    EventRecorder,
    Metrics,
    Params,
    Tags,
    candidate_artifacts,
    config_params,
)
from optimizer.searches import run_optimization
from optimizer.service import PolicyRefusal, RunPolicy
from schemas import CandidateRecord, Event, RunConfig, UserError
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program


def _event(kind: str, **data: Any) -> Event:
    return Event(seq=1, run_id="r", type=kind, data=data, ts=0.0)


def _budget(paid: int, cached: int, cost: float = 0.0) -> dict[str, Any]:
    return {"paid": paid, "cached": cached, "errors": 0, "cost_usd": cost}


def test_each_iteration_outcome_logs_the_counters_known_at_that_step() -> None:
    rec = EventRecorder()
    frontier = {"coverage": {"a": 0.5, "b": 1.0}, "best": {"candidate_id": "b", "mean": 0.75}}
    stream = [
        _event("program", program_id="p1", fingerprint="f1", budget={"max_metric_calls": 90}),
        _event("trials", budget=_budget(8, 0)),
        _event("scored", candidate_id="a", split="train", mean=0.25),
        _event("iteration", iteration=1, parent="a"),
        _event("candidate", candidate_id="b", iteration=1),
        _event("trials", budget=_budget(20, 4, 0.5)),
        _event("gate", iteration=1, candidate_id="b", child_score=3.0, accepted=True),
        _event("frontier", **frontier),
        _event("proposal_rejected", iteration=2, reason="unchanged"),
        _event("search_stopped", reason="budget", budget=_budget(30, 6, 0.75)),
    ]
    ops = [op for event in stream for op in rec.ops(event)]
    assert ops[0] == Tags({"gepa.program_id": "p1", "gepa.fingerprint": "f1"})
    assert ops[1] == Params({"resolved_max_metric_calls": "90"})
    metrics = [op for op in ops if isinstance(op, Metrics)]
    assert [m.step for m in metrics] == [1, 2, 2]  # the gate, the rejection, the stop
    assert metrics[0].values == {
        "best_train_score": 0.25,
        "paid_calls": 20.0,
        "cached_calls": 4.0,
        "errored_calls": 0.0,
        "cost_usd": 0.5,
        "candidates": 1.0,
    }
    assert metrics[1].values["best_train_score"] == 0.75
    assert metrics[1].values["frontier_best_coverage"] == 1.0
    assert metrics[1].values["frontier_size"] == 2.0
    assert metrics[2].values["paid_calls"] == 30.0 and metrics[2].values["cost_usd"] == 0.75
    assert rec.scores == {"a": {"train": 0.25}, "b": {"minibatch_gate": 3.0}}


def test_phases_promotion_and_mipro_trials_make_tags_and_steps() -> None:
    rec = EventRecorder()
    assert rec.ops(_event("phase", phase="searching")) == [Tags({"gepa.phase": "searching"})]
    (trial,) = rec.ops(_event("trial", trial=3, candidate_id="c", score=0.5))
    assert isinstance(trial, Metrics) and trial.step == 3
    metrics, tags = rec.ops(
        _event("promotion", best_id="c", lift=0.2, ci_low=0.1, ci_high=0.3, promoted=True,
               best_holdout=0.7, baseline_holdout=0.5)
    )  # fmt: skip
    assert metrics == Metrics(
        3,
        {
            "holdout_lift": 0.2,
            "holdout_lift_ci_low": 0.1,
            "holdout_lift_ci_high": 0.3,
            "best_holdout_score": 0.7,
            "baseline_holdout_score": 0.5,
        },
    )
    assert tags == Tags({"gepa.promoted": "true", "gepa.best_candidate": "c"})
    done = rec.ops(_event("phase", phase="completed", promoted=False))
    assert done == [Tags({"gepa.phase": "completed", "gepa.promoted": "false"})]


def test_params_are_the_config_without_key_names_or_masked_secrets() -> None:
    config = RunConfig(
        containers=["http://127.0.0.1:8100"],
        container_token="tok-0123456789abcdef",
        reflection_model="m",
        reflection_api_key_env="MY_KEY",
        max_metric_calls=50,
    )
    params = config_params(config.redacted())
    assert "container_token" not in params and "reflection_api_key_env" not in params
    assert "max_cost_usd" not in params  # unset
    assert params["containers"] == '["http://127.0.0.1:8100"]'
    assert params["max_metric_calls"] == "50" and params["use_merge"] == "true"
    assert all(len(v) <= 6000 for v in config_params({"long": "x" * 9000}).values())


def test_candidate_files_take_final_scores_from_the_packet_else_from_the_events() -> None:
    records = [
        CandidateRecord(run_id="r", candidate_id=cid, content_hash=cid, components={"p": text})
        for cid, text in (("a", "first"), ("b", "second"))
    ]
    packet = {"candidates": [{"candidate_id": "a", "train": 0.5, "holdout": 0.25}]}
    files = candidate_artifacts(records, packet, {"b": {"minibatch_gate": 2.0}})
    assert [f.path for f in files] == ["candidates/a.json", "candidates/b.json"]
    a, b = (json.loads(f.text) for f in files)
    assert a["components"] == {"p": "first"}
    assert a["scores"]["train"] == 0.5 and a["scores"]["holdout"] == 0.25
    assert b["scores"] == {"minibatch_gate": 2.0}
    assert isinstance(files[0], Artifact)


def test_the_uri_comes_from_the_config_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    assert tracking.tracking_uri(RunConfig()) is None
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://standard:5000")
    assert tracking.tracking_uri(RunConfig()) == "http://standard:5000"
    monkeypatch.setenv("GEPA_MLFLOW_TRACKING_URI", "http://ours:5000")
    assert tracking.tracking_uri(RunConfig()) == "http://ours:5000"
    given = RunConfig(mlflow_tracking_uri="http://flag:5000")
    assert tracking.tracking_uri(given) == "http://flag:5000"


def test_the_mlflow_flag_and_its_env_set_the_config_and_need_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = build_parser()
    base = ["optimize", "run", "--container", "http://c", "--reflection-model", "m"]
    args = parser.parse_args([*base, "--mlflow", "http://127.0.0.1:5000"])
    config = config_from_args(args)
    assert config.mlflow_tracking_uri == "http://127.0.0.1:5000"
    monkeypatch.setenv("GEPA_MLFLOW_TRACKING_URI", "http://from-env:5000")
    assert config_from_args(parser.parse_args(base)).mlflow_tracking_uri == "http://from-env:5000"
    monkeypatch.setattr(tracking, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install 'gepa-runtime\[mlflow\]'"):
        check_runnable(config)


def test_the_mlflow_flag_without_a_value_takes_the_standard_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = build_parser()
    base = ["optimize", "run", "--container", "http://c", "--reflection-model", "m"]
    for name in ("GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match="--mlflow without a URI.*MLFLOW_TRACKING_URI"):
        config_from_args(parser.parse_args([*base, "--mlflow"]))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://standard:5000")
    config = config_from_args(parser.parse_args([*base, "--mlflow"]))
    assert config.mlflow_tracking_uri == "http://standard:5000"
    # Before the run id too: `optimize run RUN_ID --mlflow` and `--mlflow` last both parse.
    args = parser.parse_args(["optimize", "run", "run-1", "--mlflow"])
    assert args.run_id == "run-1"
    assert config_from_args(args).mlflow_tracking_uri == "http://standard:5000"
    monkeypatch.setenv("GEPA_MLFLOW_TRACKING_URI", "http://ours:5000")  # ours first, as at run time
    assert config_from_args(parser.parse_args([*base, "--mlflow"])).mlflow_tracking_uri == (
        "http://ours:5000"
    )
    given = parser.parse_args([*base, "--mlflow", "http://flag:5000"])
    assert config_from_args(given).mlflow_tracking_uri == "http://flag:5000"


async def test_a_run_whose_tracking_cannot_start_warns_once_and_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A URI from the environment and no client installed: the run is not refused, it warns.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.setattr(tracking, "find_spec", lambda name: None)
    container = RuleContainer(program(["ant", "bee", "cat"]))
    seen: list[str] = []

    def listen(event: Event) -> None:
        if event.type == "warning":
            seen.append(str(event.data["message"]))

    config = RunConfig(
        containers=["http://rules"],
        reflection_model="scripted",
        max_metric_calls=60,
        minibatch_size=2,
        use_merge=False,
    )
    async with container.client() as http:
        result = await run_optimization(
            config, workspace=tmp_path / "ws", proposer=ScriptedProposer(), http=http,
            on_event=listen,
        )  # fmt: skip
    assert result.status == "completed"
    assert seen == [
        "MLflow tracking at http://127.0.0.1:9 is off: the MLflow client is not installed "
        "(pip install 'gepa-runtime[mlflow]'); the run goes on without it"
    ]
    assert result.evidence["warnings"] == seen
    assert "## Warnings" in (result.evidence_dir / "report.md").read_text()
    stored = json.loads((result.evidence_dir / tracking.STATE_FILE).read_text())
    assert stored["warnings"] == seen and stored["run_id"] is None


def test_the_service_takes_only_a_tracking_server_from_the_api() -> None:
    policy = RunPolicy()
    policy.check(RunConfig(mlflow_tracking_uri="https://mlflow.example.org"))
    for uri in ("sqlite:////etc/gepa.db", "file:///var/www/mlruns", "/tmp/mlruns"):
        with pytest.raises(PolicyRefusal, match=r"^config\.mlflow_tracking_uri: .*MLFLOW_TRACKING"):
            policy.check(RunConfig(mlflow_tracking_uri=uri))
