"""A toy task container for end-to-end tests, served by ``gepa-runtime container``.

Each task asks for a label; the "agent" answers the label only when the candidate's prompt
mentions it, so a prompt gets better by naming the right labels, which the scripted
reflection model learns from the verifier feedback ("predicted unknown, expected cow").
Every call appends ``<candidate hash> <seed>`` to ``$TOY_LOG`` so tests can count them. Seeds
named in ``$TOY_CRASH`` (comma-separated) raise in the agent on every call, as a row with a bug
does: the SDK answers 500.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from container import AgentResult, Candidate, Task, optimize
from schemas import Trace

HERE = Path(__file__).parent


@optimize(
    id="toy-labels",
    kind="prompt",
    description="Answer with the label of the item. The prompt must teach which labels exist.",
    baseline="Answer with the label.",
    dataset=HERE / "toy_data.jsonl",
)
def answer(task: Task, candidate: Candidate) -> AgentResult:
    """Answer the expected label if the prompt names it (word match), else 'unknown'."""
    log = os.environ.get("TOY_LOG")
    if log:
        canonical = json.dumps(
            dict(candidate.components), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{digest} {task.name}\n")
    time.sleep(float(os.environ.get("TOY_DELAY", "0")))
    if task.name in os.environ.get("TOY_CRASH", "").split(","):
        raise KeyError(f"row {task.name} has no field the agent needs")
    words = set(candidate.text.lower().replace(",", " ").replace(".", " ").split())
    label = str(task.expected)
    output = label if label in words else "unknown"
    return AgentResult(
        output=output,
        input_tokens=len(candidate.text.split()) + len(str(task.input).split()),
        output_tokens=1,
        cost_usd=0.0001,
        trace=Trace(
            messages=[
                {"role": "system", "content": candidate.text},
                {"role": "user", "content": str(task.input)},
                {"role": "assistant", "content": output},
            ]
        ),
    )
