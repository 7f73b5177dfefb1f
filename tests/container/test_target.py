"""The @optimize decorator, the registry, Task and Candidate."""

from __future__ import annotations

import pytest

import container
from container import (
    AgentResult,
    Candidate,
    Registry,
    Retryable,
    Task,
    clear_optimization_targets,
    get_optimization_target,
    list_optimization_targets,
    optimize,
)
from schemas import COMPONENT_KINDS, UserError
from schemas.exceptions import Retryable as SchemaRetryable


def test_public_api_is_exported() -> None:
    for name in (
        "optimize",
        "Task",
        "Candidate",
        "AgentResult",
        "list_optimization_targets",
        "get_optimization_target",
        "clear_optimization_targets",
        "Retryable",
        "create_app",
        "load_dataset",
        "load_splits",
        "load_verifier",
        "Score",
        "load_target",
    ):
        assert name in container.__all__
        assert getattr(container, name) is not None
    assert Retryable is SchemaRetryable


def test_decorator_registers_in_default_registry_and_clear_forgets() -> None:
    clear_optimization_targets()

    @optimize(id="reg-a", kind="router_prompt", description="routes", baseline="Route it.")
    def route(task: Task, candidate: Candidate) -> str:
        return candidate.text

    target = get_optimization_target("reg-a")
    assert target.fn is route
    assert target.kind == "router_prompt"
    assert dict(target.baseline) == {"system_prompt": "Route it."}
    assert [t.id for t in list_optimization_targets()] == ["reg-a"]
    assert route.__gepa_target__ is target  # type: ignore[attr-defined]
    clear_optimization_targets()
    assert list_optimization_targets() == []
    with pytest.raises(UserError, match="no optimization target 'reg-a'"):
        get_optimization_target("reg-a")


def test_unknown_kind_names_the_allowed_kinds() -> None:
    with pytest.raises(UserError) as info:
        optimize(id="bad", kind="system", baseline="x", registry=Registry())
    for kind in COMPONENT_KINDS:
        assert kind in str(info.value)


@pytest.mark.parametrize("baseline", [{}, {"a": 1}, {"": "x"}, 3])
def test_bad_baseline_is_rejected(baseline: object) -> None:
    with pytest.raises(UserError, match="baseline"):
        optimize(id="bad", baseline=baseline, registry=Registry())  # type: ignore[arg-type]


def test_multi_component_baseline_and_custom_component_name() -> None:
    registry = Registry()
    optimize(id="multi", kind="agent", baseline={"planner": "P", "writer": "W"}, registry=registry)(
        lambda task, candidate: "x"
    )
    optimize(id="single", baseline="B", component="instructions", registry=registry)(
        lambda task, candidate: "x"
    )
    assert registry.get("multi").component_names == ("planner", "writer")
    assert dict(registry.get("single").baseline) == {"instructions": "B"}


def test_duplicate_id_from_another_function_is_an_error() -> None:
    registry = Registry()

    def one(task: Task, candidate: Candidate) -> str:
        return "1"

    def two(task: Task, candidate: Candidate) -> str:
        return "2"

    optimize(id="dup", baseline="x", registry=registry)(one)
    optimize(id="dup", baseline="y", registry=registry)(one)  # same function again: replaced
    assert dict(registry.get("dup").baseline) == {"system_prompt": "y"}
    with pytest.raises(UserError, match="already used"):
        optimize(id="dup", baseline="x", registry=registry)(two)


def test_candidate_text_single_and_multi() -> None:
    single = Candidate(components={"system_prompt": "hi"}, candidate_id="c1", model="m")
    assert single.text == "hi"
    assert single["system_prompt"] == "hi"
    assert (single.candidate_id, single.model) == ("c1", "m")
    multi = Candidate(components={"planner": "p", "writer": "w"})
    with pytest.raises(UserError, match="planner, writer"):
        _ = multi.text
    assert multi.components["writer"] == "w"


def test_task_fields() -> None:
    task = Task(name="n", input="i", expected="e", instruction="do", metadata={"k": 1}, split="val")
    assert task.as_row() == {
        "name": "n",
        "input": {"input": "i"},
        "expected": "e",
        "instruction": "do",
        "metadata": {"k": 1},
    }
    assert task.split == "val"


def test_agent_result_validates_fields() -> None:
    result = AgentResult(output="x", trace={"messages": [{"role": "user", "content": "q"}]})
    assert result.trace is not None and result.trace.messages[0]["content"] == "q"
    with pytest.raises(ValueError, match="input_tokens"):
        AgentResult(output="x", input_tokens=-1)
    with pytest.raises(ValueError, match="ouput"):
        AgentResult.model_validate({"ouput": "typo"})


def test_objectives_declare_which_way_metrics_go_in_get_program() -> None:
    from pathlib import Path

    from container.program import build_served_program

    registry = Registry()
    optimize(
        id="weighed",
        baseline="B",
        objectives={"toxicity": "minimize", "exact": "maximize"},
        registry=registry,
    )(lambda task, candidate: "x")
    optimize(id="plain", baseline="B", registry=registry)(lambda task, candidate: "x")
    data = Path(__file__).parent / "fixtures" / "toy.jsonl"
    program = build_served_program(registry.get("weighed"), dataset=data).program
    assert program.model_dump(mode="json")["objectives"] == [
        "reward",
        {"name": "toxicity", "direction": "minimize"},
        {"name": "exact", "direction": "maximize"},
    ]
    assert program.directions() == {
        "reward": "maximize",
        "toxicity": "minimize",
        "exact": "maximize",
    }
    assert build_served_program(registry.get("plain"), dataset=data).program.objectives == [
        "reward"
    ]
    for bad in ({"reward": "maximize"}, {"toxicity": "lower"}):
        with pytest.raises(UserError, match="'maximize' or 'minimize'"):
            optimize(id="bad", baseline="B", objectives=bad, registry=registry)
