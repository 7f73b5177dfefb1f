"""MIPRO: demo bootstrapping, demo sets, the surface, and the search driven by a seeded TPE."""

from __future__ import annotations

import builtins
import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from container import create_app, load_target
from optimizer.mipro import (
    Surface,
    TrialSampler,
    bootstrap_demos,
    build_demo_sets,
    labelled_demos,
    load_optuna,
    surface_for,
    task_info,
)
from optimizer.runtime.steering import record_action
from optimizer.searches import run_optimization
from optimizer.testing.toy import TOY_SPLITS
from proposer import InstructionRequest, InstructionSet
from schemas import Action, Demo, ModelUsage, Program, RolloutRecord, RunConfig, UserError
from tests.fakes.servers import FAKES
from workspace import Workspace


def _record(
    seed: str, reward: float | None, output: Any, *, status: str = "ok", task: bool = True
) -> RolloutRecord:
    events = [{"type": "task", "seed": seed, "input": f"in {seed}", "expected": f"lab {seed}"}]
    return RolloutRecord(
        cache_key=f"k{seed}",
        run_id="r",
        candidate_id="c",
        candidate_hash="h",
        fingerprint="f",
        seed=seed,
        policy="{}",
        status=status,  # type: ignore[arg-type]
        reward=reward,
        output=output,
        trace={"events": events if task else []},
    )


def test_only_verified_correct_answers_become_bootstrapped_demos() -> None:
    records = [
        _record("a", 1.0, "right a"),
        _record("b", 0.0, "wrong b"),
        _record("c", 0.5, "half c"),
        _record("d", None, None, status="error"),
        _record("e", 1.0, "", task=True),
        _record("f", 1.0, "no input known", task=False),
        _record("g", 1.0, {"label": "g"}),
    ]
    demos = bootstrap_demos(records)
    assert demos == [
        ("a", Demo(input="in a", output="right a")),
        ("g", Demo(input="in g", output='{"label": "g"}')),
    ]
    assert [s for s, _ in bootstrap_demos(records, threshold=0.5)] == ["a", "c", "g"]


def test_labelled_demos_use_the_label_and_skip_bootstrapped_seeds() -> None:
    infos = [i for i in (task_info(_record(s, 0.0, "x")) for s in "abc") if i is not None]
    assert [(s, d.output) for s, d in labelled_demos(infos, exclude=["b"])] == [
        ("a", "lab a"),
        ("c", "lab c"),
    ]
    assert task_info(_record("z", 1.0, "x", task=False)) is None


def test_demo_sets_start_zero_shot_are_distinct_bounded_and_seeded() -> None:
    boot = [Demo(input=f"b{i}", output="x") for i in range(3)]
    lab = [Demo(input=f"l{i}", output="y") for i in range(6)]
    sets = build_demo_sets(boot, lab, count=6, max_demos=4, rng=random.Random(1))
    assert sets[0] == () and sets[1] == tuple(boot) and sets[2] == tuple(lab[:4])
    assert len(sets) == 6 and len(set(sets)) == 6
    assert all(0 < len(s) <= 4 for s in sets[1:])
    assert sets == build_demo_sets(boot, lab, count=6, max_demos=4, rng=random.Random(1))
    assert build_demo_sets(boot, lab, count=6, max_demos=0, rng=random.Random(1)) == [()]
    assert build_demo_sets([], [], count=6, max_demos=4, rng=random.Random(1)) == [()]


def test_surface_puts_demos_in_their_component_or_inline() -> None:
    demos = [Demo(input={"q": "1+1"}, output="2")]
    template = Surface("system_prompt", "demos", "Q: {q}")
    composed = template.compose({"system_prompt": "old", "demos": "[]"}, "new", demos)
    assert composed["system_prompt"] == "new"
    assert json.loads(composed["demos"]) == [{"input": {"q": "1+1"}, "output": "2"}]
    inline = Surface("system_prompt", None, "Q: {q}").compose(
        {"system_prompt": "old"}, "new", demos
    )
    assert inline == {"system_prompt": "new\n\nExamples:\n\nInput: Q: 1+1\nOutput: 2"}
    assert Surface("p").compose({"p": "old"}, "new", []) == {"p": "new"}


def _program(metadata: dict[str, Any], names: tuple[str, ...]) -> Program:
    return Program.model_validate(
        {
            "program_id": "p",
            "fingerprint": "f",
            "components": [{"name": n, "text": ""} for n in names],
            "seeds": {"train": ["s"]},
            "metadata": metadata,
        }
    )


def test_surface_for_reads_template_metadata_or_falls_back_to_the_prompt() -> None:
    meta = {"template": {"user_template": "Q: {q}", "demos_component": "demos"}}
    assert surface_for(_program(meta, ("system_prompt", "demos"))) == Surface(
        "system_prompt", "demos", "Q: {q}"
    )
    assert surface_for(_program({}, ("router", "system_prompt"))) == Surface("system_prompt")
    with pytest.raises(UserError, match="does not have"):
        surface_for(_program(meta, ("system_prompt",)))


def test_same_seed_same_tpe_trials() -> None:
    def trials(seed: int) -> list[tuple[int, int]]:
        sampler, out = TrialSampler(5, 4, seed=seed), []
        for _ in range(25):
            ask = sampler.ask()
            out.append((ask.instruction, ask.demo_set))
            sampler.tell(ask, None if ask.demo_set == 3 else (ask.instruction + ask.demo_set) / 7)
        return out

    assert trials(3) == trials(3)
    assert trials(3) != trials(4)


def test_missing_optuna_is_a_user_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_optuna(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "optuna" or name.startswith("optuna."):
            raise ImportError("No module named 'optuna'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "optuna", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_optuna)
    with pytest.raises(UserError, match=r"pip install 'gepa-runtime\[mipro\]'"):
        load_optuna()


class Instructions:
    """A fake instruction source: names labels seen in the examples, records requests."""

    total_usage = ModelUsage()  # what the run books: nothing

    def __init__(self) -> None:
        self.requests: list[InstructionRequest] = []

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        self.requests.append(request)
        labels = sorted({str(e.expected) for e in request.examples})
        made = tuple(
            f"Answer with the label. Known labels: {', '.join(labels[i :: request.count])}."
            for i in range(request.count)
        )
        return InstructionSet(made, "riddles", ModelUsage(calls=request.count + 1))

    async def propose(self, request: object) -> object:
        raise AssertionError("MIPRO never asks for a mutation")

    async def merge(self, request: object) -> object:
        raise AssertionError("MIPRO never asks for a merge")

    async def aclose(self) -> None:
        """Nothing to release."""


async def _mipro_run(tmp: Path, seed: int) -> tuple[dict[str, Any], Instructions]:
    target = load_target(str(FAKES / "toy_template_container.py"))
    app = create_app(target, splits=TOY_SPLITS)
    source = Instructions()
    config = RunConfig(
        containers=["http://toy"],
        reflection_model="fake",
        method="mipro",
        max_metric_calls=200,
        minibatch_size=4,
        num_instructions=4,
        num_demo_sets=4,
        max_demos=3,
        full_eval_every=4,
        seed=seed,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport) as http, Workspace(tmp) as ws:
        result = await run_optimization(config, workspace=ws, proposer=source, http=http)  # type: ignore[arg-type]
        events = [e.type for e in await ws.events_since(result.run_id)]
    assert "mipro_setup" in events and events.count("trial") == len(
        result.evidence["mipro"]["trials"]
    )
    return result.evidence, source


async def test_mipro_run_is_reproducible_for_a_seed_and_uses_the_runtime(tmp_path: Path) -> None:
    first, source = await _mipro_run(tmp_path / "a", seed=5)
    again, _ = await _mipro_run(tmp_path / "b", seed=5)
    other, _ = await _mipro_run(tmp_path / "c", seed=6)

    def params(packet: dict[str, Any]) -> list[tuple[int, int, list[str]]]:
        return [
            (t["instruction"], t["demo_set"], t["minibatch"]) for t in packet["mipro"]["trials"]
        ]

    assert params(first) == params(again) and params(first) != params(other)
    mipro = first["mipro"]
    # Grounded in train examples with their labels; the baseline instruction is index 0.
    assert len(source.requests[0].examples) == 24 and source.requests[0].count == 3
    assert mipro["instructions"][0] == "Answer with the label."
    assert mipro["demo_sets"][0] == [] and len(mipro["demo_sets"]) == 4
    # The baseline answers nothing right: no bootstrapped demos, only labelled ones.
    assert mipro["setup"]["bootstrapped"] == 0 and mipro["setup"]["labelled"] == 24
    # The shared runtime: budget respected, the best chosen on heldout and better than baseline.
    assert first["rollouts"]["paid"] <= 200
    assert first["best"]["holdout"] > first["baseline"]["holdout"]
    assert first["best"]["origin"] == "mipro" and first["method"] == "mipro"
    assert first["best"]["candidate_id"] in {t["candidate_id"] for t in mipro["trials"]}
    assert all(t["paid"] <= 4 for t in mipro["trials"])
    # Why each candidate was kept: MIPRO's trials, then the runtime's scores and the winner.
    why = {c["candidate_id"]: c for c in first["decisions"]}
    for t in mipro["trials"]:
        said = [d["text"] for d in why[t["candidate_id"]]["decisions"] if d["kind"] == "trial"]
        assert any(f"trial {t['trial']}: instruction {t['instruction']} " in x for x in said)
    assert why[first["best"]["candidate_id"]]["decision"].startswith("winner")


async def test_search_stops_once_trials_only_repeat_what_it_scored(tmp_path: Path) -> None:
    target = load_target(str(FAKES / "toy_template_container.py"))
    app = create_app(target, splits=TOY_SPLITS)
    config = RunConfig(
        containers=["http://toy"], reflection_model="fake", method="mipro",
        max_metric_calls=5000, minibatch_size=4, num_instructions=1, num_demo_sets=1,
        max_idle_iterations=3, seed=0,
    )  # fmt: skip
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport) as http:
        result = await run_optimization(
            config,
            workspace=tmp_path,
            proposer=Instructions(),
            http=http,  # type: ignore[arg-type]
        )
    packet = result.evidence
    trials = packet["mipro"]["trials"]
    # One candidate (the baseline): 6 trials cover the 24 train seeds, then 3 idle ones.
    assert len(trials) == 9 and {t["candidate_id"] for t in trials} == {
        packet["baseline"]["candidate_id"]
    }
    assert "search space covered" in packet["stop_reason"]
    assert all(t["paid"] == 0 for t in trials)  # the baseline's train rollouts were cached


async def test_a_persons_stop_ends_the_mipro_search_before_its_next_trial(tmp_path: Path) -> None:
    target = load_target(str(FAKES / "toy_template_container.py"))
    app = create_app(target, splits=TOY_SPLITS)
    config = RunConfig(
        containers=["http://toy"], reflection_model="fake", method="mipro",
        max_metric_calls=400, minibatch_size=4, num_instructions=2, num_demo_sets=2, seed=0,
    )  # fmt: skip
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport) as http, Workspace(tmp_path) as ws:
        run_id = (await ws.create_run(config)).run_id
        await record_action(ws, run_id, Action(action="stop", reason="enough", source="cli"))
        result = await run_optimization(
            config,
            workspace=ws,
            run_id=run_id,
            proposer=Instructions(),
            http=http,  # type: ignore[arg-type]
        )
    packet = result.evidence
    assert packet["stop_reason"] == "stopped by a person (cli): enough"
    assert packet["mipro"]["trials"] == [] and result.status == "completed"
