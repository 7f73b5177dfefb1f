"""The spec API's rows: flat dicts whose keys a template's placeholders name, and their label.

The spec's dataset is a list of flat rows such as ``{"query": ..., "intent": ..., "intents":
...}`` with a template naming ``{query}`` and ``{intents}``. Row ``i`` becomes the SDK row
``{"name": "row-<i>", "input": <every field but the label>, "expected": <label>}``, so its
seed is its index and every field stays renderable. The label column is, in order:

1. the config's ``label_column``;
2. the first of ``ground_truth``, ``label``, ``answer``, ``expected`` the rows have;
3. the one field the user template does not use (``intent`` above).

Every row is rendered once here, so a row the template cannot render is a ``TemplateError``
naming its index, the missing field and the fix before any model is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.api.spec.message import Message, messages_of
from schemas import PromptTemplate, TemplateError, UserError
from schemas.template import placeholders, render_messages

__all__ = [
    "LABEL_COLUMNS",
    "Sample",
    "find_label_column",
    "format_prompt",
    "row_name",
    "sample_fields",
    "spec_rows",
]

LABEL_COLUMNS = ("ground_truth", "label", "answer", "expected")


def row_name(index: int) -> str:
    """The seed name of row ``index`` (seeds are row indices)."""
    return f"row-{index:05d}"


@dataclass(frozen=True)
class Sample:
    """One dataset row as ``score_fn`` sees it: its fields, its label and its index.

    ``sample["query"]`` and ``sample.get("query")`` read a field; ``ground_truth`` is the
    label (``None`` for a row without one).
    """

    id: str
    input: Mapping[str, Any]
    ground_truth: Any = None
    index: int = -1
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.input[key]

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the row, or ``default``."""
        return self.input.get(key, default)


def find_label_column(
    rows: Sequence[Mapping[str, Any]], template: PromptTemplate, configured: str | None
) -> str | None:
    """The label column (see the module docstring); ``UserError`` when it cannot be told."""
    if not rows:
        raise UserError("dataset= is empty; give a list of row dicts")
    if configured is not None:
        missing = [i for i, row in enumerate(rows) if configured not in row]
        if missing:
            raise UserError(
                f"label_column={configured!r} is not a field of row {missing[0]} (fields: "
                f"{', '.join(map(str, rows[missing[0]]))}); name a column every row has"
            )
        return configured
    for name in LABEL_COLUMNS:
        if all(name in row for row in rows):
            return name
    used = set(placeholders(template.user_template))
    unused = [name for name in rows[0] if name not in used]
    if len(unused) == 1:
        return str(unused[0])
    if not unused:
        return None
    raise UserError(
        f"cannot tell the label column: the rows have no {'/'.join(LABEL_COLUMNS)} field and "
        f"the template leaves several fields unused ({', '.join(map(str, unused))}); set "
        "label_column= in the config"
    )


def spec_rows(
    rows: Sequence[Mapping[str, Any]], template: PromptTemplate, label: str | None
) -> list[dict[str, Any]]:
    """The SDK rows of ``rows``, each checked to render (``TemplateError`` naming row and fix)."""
    out = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise UserError(f"dataset row {index} is a {type(row).__name__}; each row is a dict")
        fields = {str(k): v for k, v in row.items() if k != label}
        _check_renders(template, index, fields, label)
        out.append({"name": row_name(index), "input": fields, "expected": row.get(label or "")})
    return out


def _check_renders(
    template: PromptTemplate, index: int, fields: Mapping[str, Any], label: str | None
) -> None:
    missing = [name for name in placeholders(template.user_template) if name not in fields]
    if not fields:
        raise UserError(f"dataset row {index} has no field besides its label {label!r}")
    if missing:
        why = f" ({label!r} is the label column, never shown)" if label in missing else ""
        raise TemplateError(
            f"dataset row {index}: user_template {template.user_template!r} needs field(s) "
            f"{', '.join(missing)}{why} but the row has: {', '.join(sorted(fields))}; add the "
            "field(s) to every row or change the template's placeholders"
        )


def sample_fields(sample: Mapping[str, Any] | Sample) -> Mapping[str, Any]:
    """The renderable fields of a row dict or a ``Sample``."""
    return sample.input if isinstance(sample, Sample) else sample


def format_prompt(template: PromptTemplate, sample: Mapping[str, Any] | Sample) -> list[Message]:
    """Pure: the chat messages for one row (system, demos as user/assistant pairs, the row).

    Each is a :class:`Message`, read as ``m.content`` or ``m["content"]``.
    """
    return list(messages_of(render_messages(template, sample_fields(sample))))
