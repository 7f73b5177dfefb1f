"""Score a Banking77 answer: normalized exact match, with feedback the proposer can act on.

A wrong answer's feedback names the predicted and the expected label and shows real training
queries of both, which is what separates two intents; an answer that is not a label says so
and quotes it. Example queries never include the seed's own query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from container import AgentResult, Score, Task
from examples.banking77.labels import UNKNOWN, normalize_label, parse_label

__all__ = ["Banking77Verifier"]


class Banking77Verifier:
    """``(task, result) -> Score``; ``examples`` maps a label to training queries."""

    def __init__(
        self, labels: Sequence[str], examples: Mapping[str, Sequence[str]], *, per_label: int = 2
    ) -> None:
        self.labels = tuple(labels)
        self.examples = {label: tuple(texts) for label, texts in examples.items()}
        self.per_label = per_label

    def _looks_like(self, label: str, exclude: str) -> str:
        texts = [t for t in self.examples.get(label, ()) if t != exclude][: self.per_label]
        if not texts:
            return ""
        quoted = "; ".join(f'"{t}"' for t in texts)
        return f" Queries labelled {label} look like: {quoted}."

    def __call__(self, task: Task, result: AgentResult) -> Score:
        """Score 1.0 when the answer maps to the expected label, else 0.0 with the reason."""
        expected = str(task.expected)
        raw = str((result.metadata or {}).get("raw_output", result.output) or "")
        predicted = parse_label(str(result.output or ""), self.labels)
        query = str(task.input.get("text", ""))
        if normalize_label(predicted) == normalize_label(expected):
            return Score(score=1.0, feedback=f"correct: predicted {predicted}")
        if predicted == UNKNOWN:
            shown = raw.strip()[:120] or "(empty)"
            return Score(
                score=0.0,
                feedback=(
                    f"the output {shown!r} is not one of the {len(self.labels)} labels; "
                    f"expected {expected}. Answer with exactly one label from the list and "
                    f"nothing else.{self._looks_like(expected, query)}"
                ),
            )
        return Score(
            score=0.0,
            feedback=(
                f"predicted {predicted}, expected {expected} for the query {query!r}."
                f"{self._looks_like(expected, query)}{self._looks_like(predicted, query)}"
            ),
        )
