"""Prompt templates: a system prompt, a user template with ``{placeholders}``, few-shot demos.

A template is what both optimizers can work on. GEPA rewrites its text; MIPRO picks an
instruction and a demo set for it. It crosses files (``save`` / ``load`` as JSON) and the
wire (as two components, ``system_prompt`` and ``demos``, the demos as a JSON list), so it is
a pydantic model. ``render_messages`` is the one pure function that turns a template and a
task's fields into chat messages: system prompt, then each demo as a user/assistant pair,
then the task.

A task's input is either a mapping of fields (``{"question": ..., "unit": ...}``) or a single
value, which fills the ``{input}`` placeholder.

The spec API's names are the same fields, not copies: ``system`` is ``system_prompt`` and
``few_shot_examples`` is ``demos`` (both names are accepted when building or loading and both
read the same value), and ``FewShotExample`` is ``Demo``. ``score``, ``generation`` and ``id``
are what an optimization result says about a template; they are not part of its components,
so they change neither a candidate's hash nor a rollout.
"""

from __future__ import annotations

import json
import string
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.exceptions import UserError

__all__ = [
    "DEMOS_COMPONENT",
    "SYSTEM_COMPONENT",
    "Demo",
    "FewShotExample",
    "PromptTemplate",
    "TemplateError",
    "demos_from_text",
    "demos_to_text",
    "placeholders",
    "render_messages",
    "task_fields",
]

SYSTEM_COMPONENT = "system_prompt"
DEMOS_COMPONENT = "demos"


class TemplateError(UserError):
    """A template that cannot be built or rendered; the message names the field and the fix."""


class Demo(BaseModel):
    """One few-shot example: the task's input (fields or one value) and the wanted output.

    ``FewShotExample("2+2", "4")`` (the spec's name, positional) builds the same model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Any
    output: str

    def __init__(self, *args: Any, **data: Any) -> None:
        if len(args) > 2:
            raise TypeError("FewShotExample takes (input, output)")
        data.update(zip(("input", "output"), args, strict=False))
        super().__init__(**data)


FewShotExample = Demo
_ALIASES = {"system": "system_prompt", "few_shot_examples": "demos"}


def placeholders(user_template: str) -> tuple[str, ...]:
    """The field names a user template uses, in order of first use."""
    names: list[str] = []
    try:
        parsed = list(string.Formatter().parse(user_template))
    except ValueError as exc:
        raise TemplateError(
            f"user_template {user_template!r} is not a valid format string ({exc}); "
            "write literal braces as {{ and }}"
        ) from exc
    for _, name, _, _ in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise TemplateError(
                f"user_template placeholder {{{name}}} must be a plain field name such as "
                "{question}; positional {} and attribute or index access are not allowed"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


class PromptTemplate(BaseModel):
    """System prompt + user template + ordered few-shot demos."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system_prompt: str = Field(validation_alias=AliasChoices("system_prompt", "system"))
    user_template: str = "{input}"
    demos: tuple[Demo, ...] = Field(
        default_factory=tuple, validation_alias=AliasChoices("demos", "few_shot_examples")
    )
    # What a result says about the template (the spec's metadata), never part of a candidate.
    score: float | None = None
    generation: int = 0
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:8])

    @model_validator(mode="before")
    @classmethod
    def _one_name_each(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for alias, name in _ALIASES.items():
                if alias in data and name in data:
                    raise ValueError(f"give {name}= or {alias}= (the same field), not both")
        return data

    @property
    def system(self) -> str:
        """The system prompt (the spec's name for ``system_prompt``)."""
        return self.system_prompt

    @property
    def few_shot_examples(self) -> tuple[Demo, ...]:
        """The few-shot demos (the spec's name for ``demos``)."""
        return self.demos

    @field_validator("user_template")
    @classmethod
    def _valid_template(cls, value: str) -> str:
        try:
            names = placeholders(value)
        except TemplateError as exc:  # reported by pydantic with the field's name
            raise ValueError(str(exc)) from None
        if not names:
            raise ValueError("user_template needs at least one {placeholder}, e.g. '{input}'")
        return value

    def render(self, task_input: Any) -> list[dict[str, str]]:
        """Chat messages for one task input (see ``render_messages``)."""
        return render_messages(self, task_fields(task_input))

    def to_components(self) -> dict[str, str]:
        """The template as optimizer components: ``system_prompt`` and ``demos`` (JSON)."""
        return {SYSTEM_COMPONENT: self.system_prompt, DEMOS_COMPONENT: demos_to_text(self.demos)}

    def with_components(self, components: Mapping[str, str]) -> PromptTemplate:
        """This template with the system prompt and demos taken from ``components``."""
        update: dict[str, Any] = {}
        if SYSTEM_COMPONENT in components:
            update["system_prompt"] = components[SYSTEM_COMPONENT]
        if DEMOS_COMPONENT in components:
            update["demos"] = demos_from_text(components[DEMOS_COMPONENT])
        return self.model_copy(update=update)

    def check_demos(self) -> None:
        """Raise ``TemplateError`` naming the first demo whose input does not fit the template."""
        for i, demo in enumerate(self.demos):
            try:
                _fill(self.user_template, task_fields(demo.input))
            except TemplateError as exc:
                raise TemplateError(f"component {DEMOS_COMPONENT!r} item {i}: {exc}") from None

    def save(self, path: str | Path) -> Path:
        """Write the template as JSON; returns the path."""
        target = Path(path)
        target.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> PromptTemplate:
        """Read a template saved by ``save`` (``TemplateError`` naming the bad field)."""
        source = Path(path)
        try:
            return cls.model_validate_json(source.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TemplateError(f"template file {source} does not exist") from None
        except ValidationError as exc:
            raise TemplateError(f"template file {source}: {_first_error(exc)}") from None


def task_fields(task_input: Any) -> dict[str, Any]:
    """A task input as template fields: a mapping as is, any other value as ``{input}``."""
    if isinstance(task_input, Mapping):
        return {str(k): v for k, v in task_input.items()}
    return {"input": task_input}


def _fill(user_template: str, fields: Mapping[str, Any]) -> str:
    missing = [name for name in placeholders(user_template) if name not in fields]
    if missing:
        have = ", ".join(sorted(fields)) or "none"
        raise TemplateError(
            f"user_template {user_template!r} needs field(s) {', '.join(missing)} but the "
            f"input has: {have}; change the template's placeholders or the input's fields"
        )
    return user_template.format_map({k: v for k, v in fields.items()})


def render_messages(template: PromptTemplate, fields: Mapping[str, Any]) -> list[dict[str, str]]:
    """The chat messages of one task: system, each demo as user/assistant, then the task."""
    messages = [{"role": "system", "content": template.system_prompt}]
    for demo in template.demos:
        messages.append(
            {"role": "user", "content": _fill(template.user_template, task_fields(demo.input))}
        )
        messages.append({"role": "assistant", "content": demo.output})
    messages.append({"role": "user", "content": _fill(template.user_template, fields)})
    return messages


def demos_to_text(demos: tuple[Demo, ...] | list[Demo]) -> str:
    """Demos as the text of the ``demos`` component: a JSON list of ``{input, output}``."""
    return json.dumps([d.model_dump(mode="json") for d in demos], ensure_ascii=False, indent=1)


def demos_from_text(text: str) -> tuple[Demo, ...]:
    """Parse the ``demos`` component; ``TemplateError`` saying what is wrong with it."""
    if not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"component {DEMOS_COMPONENT!r} is not valid JSON ({exc.msg} at line {exc.lineno}); "
            'it must be a list like [{"input": ..., "output": "..."}]'
        ) from None
    if not isinstance(raw, list):
        raise TemplateError(
            f"component {DEMOS_COMPONENT!r} must be a JSON list of "
            f'{{"input", "output"}} objects, got {type(raw).__name__}'
        )
    demos = []
    for i, item in enumerate(raw):
        try:
            demos.append(Demo.model_validate(item))
        except ValidationError as exc:
            raise TemplateError(
                f"component {DEMOS_COMPONENT!r} item {i}: {_first_error(exc)}; "
                'each item is {"input": ..., "output": "..."}'
            ) from None
    return tuple(demos)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{where}: {err['msg']}"
