"""Score a calculator answer: a numeric match, with feedback about how the agent got there.

The built-in ``numeric`` verifier compares numbers; this one also reads the rollout's
metadata and tool log, because what a prompt can fix is visible there: the agent never used
the calculator, typed expressions it refused, ran out of steps or never wrote ``Answer:``.
"""

from __future__ import annotations

import math

from container import AgentResult, Score, Task
from examples.calculator.protocol import first_number
from schemas import UserError

__all__ = ["CalculatorVerifier"]


class CalculatorVerifier:
    """``(task, result) -> Score``: 1.0 when the answer is within ``abs_tol`` of expected."""

    def __init__(self, *, abs_tol: float = 0.01) -> None:
        self.abs_tol = abs_tol

    def __call__(self, task: Task, result: AgentResult) -> Score:
        """Compare the output's number with ``task.expected``; say what went wrong if not."""
        expected_text = first_number(str(task.expected))
        if not expected_text:
            raise UserError(f"seed {task.name!r}: expected value {task.expected!r} is not a number")
        answered = first_number(str(result.output or ""))
        notes = _notes(result)
        if answered and math.isclose(
            float(answered), float(expected_text), rel_tol=0.0, abs_tol=self.abs_tol
        ):
            return Score(score=1.0, feedback=f"correct: answered {answered}{_calls(result)}")
        said = f"answered {answered}" if answered else "gave no numeric answer"
        return Score(
            score=0.0, feedback=f"{said}, expected {expected_text}{_calls(result)}.{notes}"
        )


def _calls(result: AgentResult) -> str:
    count = int((result.metadata or {}).get("tool_calls", 0))
    return f" ({count} calculator call{'' if count == 1 else 's'})"


def _notes(result: AgentResult) -> str:
    metadata = result.metadata or {}
    notes: list[str] = []
    calls = result.trace.tool_calls if result.trace else []
    if not calls:
        notes.append(
            "The agent did not use the calculator: it should compute every multiplication, "
            "division and percentage with Action: calculator[<expression>]."
        )
    errors = [c for c in calls if c.get("error")]
    if errors:
        shown = "; ".join(
            f"{c['arguments'].get('expression', '')!r} -> {c['error']}" for c in errors[:3]
        )
        notes.append(f"Calculator errors: {shown}.")
    results = [c["result"] for c in calls if c.get("result") is not None]
    if results:
        notes.append(f"Its last calculator result was {results[-1]}.")
    stop = metadata.get("stop_reason")
    if stop == "max_steps":
        notes.append(
            f"It ran out of steps ({metadata.get('max_steps', '?')}) before writing "
            "'Answer: <number>'."
        )
    elif stop == "no_answer_line":
        notes.append(
            "Its last reply had neither an Action nor an 'Answer: <number>' line; the last "
            "number in it was taken as the answer."
        )
    return "".join(f" {note}" for note in notes)
