"""What a target receives for one rollout: the ``Task`` (one dataset row) and the ``Candidate``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from container.faults import UserMistake
from schemas import PromptTemplate

__all__ = ["Candidate", "Task"]


@dataclass(frozen=True)
class Task:
    """One dataset row, named by a stable seed name.

    ``input`` is what the agent works on, always a dict of fields (a row's ``text`` column
    arrives as ``{"text": ...}``, so ``task.input.get("order_id")`` works for every row);
    ``expected`` what the verifier compares against (``None`` when the dataset has no such
    column); ``expected_schema`` a JSON Schema of the wanted output a verifier may use;
    ``split`` is ``train``, ``val``, ``holdout`` or ``None`` for a row in no split.
    """

    name: str
    input: Mapping[str, Any]
    expected: Any = None
    instruction: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    split: str | None = None
    expected_schema: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.input, Mapping):  # Task(input="q") in user code and tests
            object.__setattr__(self, "input", {"input": self.input})

    @property
    def fields(self) -> dict[str, Any]:
        """The row's own fields, what a user template's ``{placeholders}`` name.

        The metadata columns and the input's fields (the input wins a clash); a single-field
        input also fills ``{input}``, so ``"{input}"`` renders a row with a ``text`` column.
        """
        fields = {**self.metadata, **self.input}
        if len(self.input) == 1 and "input" not in fields:
            fields["input"] = next(iter(self.input.values()))
        return fields

    def as_row(self) -> dict[str, Any]:
        """The row content that defines this task (what the fingerprint hashes)."""
        return {
            "name": self.name,
            "input": self.input,
            "expected": self.expected,
            "instruction": self.instruction,
            "metadata": dict(self.metadata),
            **({"expected_schema": self.expected_schema} if self.expected_schema else {}),
        }


@dataclass(frozen=True)
class Candidate:
    """The text of every component for this rollout, plus who asks and with which model.

    ``model`` is the rollout request's ``policy.model``: ``None`` means "use the container's
    own default student model".
    """

    components: Mapping[str, str]
    candidate_id: str = ""
    model: str | None = None
    template_: PromptTemplate | None = None

    @property
    def template(self) -> PromptTemplate:
        """The candidate as a prompt template (for targets declared with a ``PromptTemplate``)."""
        if self.template_ is None:
            raise UserMistake(
                "CandidateMisuse",
                "candidate.template needs a target declared with "
                "@optimize(baseline=PromptTemplate(...)); this one has plain components",
            )
        return self.template_

    @property
    def text(self) -> str:
        """The single component's text; an error naming the components when there are several."""
        if len(self.components) != 1:
            names = ", ".join(sorted(self.components))
            raise UserMistake(
                "CandidateMisuse",
                f"candidate.text needs a single-component program, this one has {names}; "
                "use candidate.components[name] instead",
            )
        return next(iter(self.components.values()))

    def __getitem__(self, name: str) -> str:
        """``candidate["system_prompt"]``: the text of one component."""
        return self.components[name]
