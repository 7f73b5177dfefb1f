"""A toy template container: the agent knows a label when the system prompt or a demo names it.

Served by ``gepa-runtime container`` in end-to-end tests and in-process in unit tests. The
target is declared with a ``PromptTemplate``, so its components are ``system_prompt`` and
``demos``; demos whose outputs name labels help exactly like an instruction that names
them, which is what lets MIPRO's demo sets make a measurable difference. Every call appends
``<candidate hash> <seed>`` to ``$TOY_LOG`` when set.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from container import AgentResult, Candidate, Task, optimize
from optimizer.testing.toy import TOY_DATA
from schemas import PromptTemplate

BASELINE = PromptTemplate(system_prompt="Answer with the label.", user_template="Riddle: {input}")


@optimize(
    id="toy-template",
    kind="prompt",
    description="Answer a riddle with the animal's three-letter label.",
    baseline=BASELINE,
    dataset=TOY_DATA,
)
def answer(task: Task, candidate: Candidate) -> AgentResult:
    """The expected label when the rendered prompt names it before the task, else 'unknown'."""
    log = os.environ.get("TOY_LOG")
    if log:
        canonical = json.dumps(dict(candidate.components), sort_keys=True)
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{digest} {task.name}\n")
    messages = candidate.template.render(task.input)
    context = " ".join(m["content"] for m in messages[:-1])
    known = set(re.findall(r"[a-z]+", context.lower()))
    output = str(task.expected) if str(task.expected) in known else "unknown"
    return AgentResult(
        output=output,
        input_tokens=len(context.split()),
        output_tokens=1,
        messages=[*messages, {"role": "assistant", "content": output}],
    )
