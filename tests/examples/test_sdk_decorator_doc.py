"""The SDK doc's decorator example (``02-sdk-decorator.txt``), run as written.

The block between ``# --- doc`` and ``# --- end doc`` is the doc's code with only the import
line changed (``mv37.rollout`` -> ``container``); ``run_agent`` is the reader's own agent,
defined here. It is served by a real container on 127.0.0.1 and rolled out over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from container import clear_optimization_targets, create_app
from optimizer.testing import thread_server

SEEN: list[Any] = []


def run_agent(instruction: str, *, system_prompt: str, order_id: Any) -> str:
    """The reader's agent: it remembers the task it was given."""
    SEEN.append((instruction, system_prompt, order_id))
    return f"refund issued for {order_id}"


def test_decorator_example_serves_and_reads_the_task_as_the_doc_says(tmp_path: Path) -> None:
    clear_optimization_targets()
    # --- doc
    import container as rollout

    BASELINE_PROMPT = "You are a careful support agent."

    @rollout.optimize(
        id="support-agent-system-prompt",
        kind="prompt",
        description="System prompt for the support agent",
        baseline=BASELINE_PROMPT,
    )
    def run_candidate(
        task: rollout.Task,
        candidate: rollout.Candidate,
    ) -> rollout.AgentResult:
        answer = run_agent(
            task.instruction,
            system_prompt=candidate.text,  # GEPA proposes this
            order_id=task.input.get("order_id"),
        )
        return rollout.AgentResult(output=answer)

    # --- end doc
    schema = {"type": "string", "pattern": "^refund issued"}
    rows = [
        {"name": "r1", "instruction": "Refund the order.", "input": {"order_id": "A-17"},
         "expected": "refund issued for A-17", "metadata": {"tier": "gold"},
         "expected_schema": schema},
        {"name": "r2", "instruction": "Where is it?", "text": "my parcel is late",
         "expected": "refund issued for None", "channel": "email"},
    ]  # fmt: skip
    dataset = tmp_path / "refunds.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    target = rollout.get_optimization_target("support-agent-system-prompt")
    assert [t.id for t in rollout.list_optimization_targets()] == [target.id]
    tasks: list[Any] = []
    original = target.fn

    def spy(task: Any, candidate: Any) -> Any:
        tasks.append(task)
        return original(task, candidate)

    app = create_app(target.__class__(**{**target.__dict__, "fn": spy}), dataset=dataset)
    with thread_server(app) as url:
        answers = [
            httpx.post(f"{url}/rollout", json={"candidate": {"system_prompt": "Be kind."},
                                              "seed": seed}, timeout=30).json()
            for seed in ("r1", "r2")
        ]  # fmt: skip
    assert [a["reward"] for a in answers] == [1.0, 1.0]
    assert SEEN[-2:] == [
        ("Refund the order.", "Be kind.", "A-17"),
        ("Where is it?", "Be kind.", None),
    ]
    first, second = tasks
    assert first.input == {"order_id": "A-17"} and second.input == {"text": "my parcel is late"}
    assert first.metadata == {"tier": "gold"}  # the metadata column is the metadata, not nested
    assert second.metadata == {"channel": "email"}
    assert first.expected_schema == schema and second.expected_schema is None
    rollout.clear_optimization_targets()
    assert rollout.list_optimization_targets() == []
