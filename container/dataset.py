"""Datasets: JSONL, JSON (a list of objects), CSV files, or a folder of them -> ``Task`` rows.

Column mapping (the first column present wins, the rest go to ``metadata``):

- name: ``name`` | ``id``; otherwise ``<file stem>-<row index, 5 digits>``
- input: ``input`` | ``text`` | ``question`` | ``query`` | ``prompt`` (required: a row whose
  input is missing, null, blank or empty is refused with its row number, never served).
  ``Task.input`` is always a dict: an ``input`` object as is, any other value as
  ``{column: value}`` (``{"text": ...}``, ``{"input": ...}``)
- expected: ``expected`` | ``ground_truth`` | ``label`` | ``answer`` | ``category`` |
  ``output`` | ``target``
- instruction: ``instruction``; expected_schema: ``expected_schema`` (a JSON Schema object,
  in CSV as JSON text) (both optional)
- metadata: a ``metadata`` object column is the metadata itself; the other columns join it

A folder whose files are named ``train.*``, ``val.*`` (or ``validation``/``dev``) and
``holdout.*`` (or ``test``) defines the splits by file. ``splits.json`` and
``verifier.json`` inside a folder are companions, not data, and are skipped.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from container.task import Task
from schemas import UserError

__all__ = ["Dataset", "load_dataset"]

NAME_COLUMNS = ("name", "id")
INPUT_COLUMNS = ("input", "text", "question", "query", "prompt")
EXPECTED_COLUMNS = ("expected", "ground_truth", "label", "answer", "category", "output", "target")
SUFFIXES = (".jsonl", ".json", ".csv")
COMPANIONS = ("splits.json", "verifier.json")
SPLIT_STEMS = {
    "train": "train",
    "val": "val",
    "validation": "val",
    "dev": "val",
    "holdout": "holdout",
    "test": "holdout",
}


@dataclass(frozen=True)
class Dataset:
    """The rows of a dataset as tasks, in file order, with splits defined by file names if any."""

    tasks: tuple[Task, ...]
    source: str = ""
    file_splits: dict[str, tuple[str, ...]] | None = None
    by_name: dict[str, Task] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {t.name: t for t in self.tasks})

    def __len__(self) -> int:
        return len(self.tasks)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def get(self, name: str) -> Task | None:
        """The task named ``name`` or ``None``."""
        return self.by_name.get(name)

    def rows(self) -> list[dict[str, Any]]:
        """Every row's defining content, for hashing."""
        return [t.as_row() for t in self.tasks]


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset file or folder; a ``UserError`` says what is wrong and where."""
    root = Path(path)
    if root.is_dir():
        files = sorted(
            p
            for p in root.iterdir()
            if p.is_file() and p.suffix.lower() in SUFFIXES and p.name not in COMPANIONS
        )
        if not files:
            raise UserError(f"dataset folder {root} has no .jsonl, .json or .csv file")
    elif root.is_file():
        if root.suffix.lower() not in SUFFIXES:
            raise UserError(f"dataset {root}: unsupported file type; use .jsonl, .json or .csv")
        files = [root]
    else:
        raise UserError(f"dataset {root} does not exist")

    by_split = {p: SPLIT_STEMS.get(p.stem.lower()) for p in files}
    split_files = [p for p, s in by_split.items() if s]
    if root.is_dir() and split_files and len(split_files) != len(files):
        others = ", ".join(p.name for p, s in by_split.items() if not s)
        raise UserError(
            f"dataset folder {root} mixes split files (train/val/holdout/test) with other "
            f"files ({others}); put every row in a split file or use --splits-file"
        )

    tasks: list[Task] = []
    file_splits: dict[str, list[str]] = {}
    for file in files:
        rows = [_task(file, i, where, row) for i, (where, row) in enumerate(_read(file))]
        tasks.extend(rows)
        split = by_split[file]
        if root.is_dir() and split:
            file_splits.setdefault(split, []).extend(t.name for t in rows)
    if not tasks:
        raise UserError(f"dataset {root} has no rows")
    duplicates = [n for n, c in Counter(t.name for t in tasks).items() if c > 1]
    if duplicates:
        raise UserError(
            f"dataset {root} has duplicate row names: {', '.join(sorted(duplicates)[:10])}; "
            "names (the name/id column) must be unique"
        )
    splits = {k: tuple(v) for k, v in file_splits.items()} if file_splits else None
    return Dataset(tasks=tuple(tasks), source=str(root), file_splits=splits)


def _read(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` pairs; ``where`` says how to find the row in the file."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read dataset file {file}: {exc}") from exc
    suffix = file.suffix.lower()
    if suffix == ".csv":
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            for i, row in enumerate(reader, start=1):
                where = f"row {i} (line {reader.line_num})"
                if None in row:
                    raise UserError(
                        f"dataset file {file}, {where}: more values than header columns"
                    )
                yield where, row
        except csv.Error as exc:
            raise UserError(f"dataset file {file}: invalid CSV ({exc})") from exc
        return
    if suffix == ".jsonl":
        rows = (line for line in enumerate(text.splitlines(), start=1) if line[1].strip())
        for i, (lineno, line) in enumerate(rows, start=1):
            where = f"row {i} (line {lineno})"
            yield where, _object(file, _json(file, line, where), where)
        return
    data = _json(file, text, "file")
    if not isinstance(data, list):
        raise UserError(
            f"dataset file {file} must hold a JSON list of objects, got {type(data).__name__}"
        )
    for i, item in enumerate(data):
        yield f"item {i}", _object(file, item, f"item {i}")


def _json(file: Path, text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"dataset file {file}, {where}: invalid JSON ({exc})") from exc


def _object(file: Path, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(
            f"dataset file {file}, {where}: expected an object, got {type(value).__name__}"
        )
    return value


def _task(file: Path, index: int, where: str, row: dict[str, Any]) -> Task:
    rest = dict(row)
    name = _pop_first(rest, NAME_COLUMNS)
    if name is None or str(name) == "":
        name = f"{file.stem}-{index:05d}"
    column = next((c for c in INPUT_COLUMNS if c in rest), None)
    if column is None:
        raise UserError(
            f"dataset file {file}, {where}: no input column; expected one of "
            f"{', '.join(INPUT_COLUMNS)}, found: {', '.join(map(str, row)) or 'no columns'}"
        )
    task_input = rest.pop(column)
    if _is_missing(task_input):
        raise UserError(
            f"dataset file {file}, {where} (seed {str(name)!r}): its input column {column!r} "
            f"is {_describe(task_input)}; every row needs an input for the agent to work on: "
            "fill it in or remove the row"
        )
    expected = _pop_first(rest, EXPECTED_COLUMNS)
    instruction = rest.pop("instruction", "")
    schema = _schema(file, where, rest.pop("expected_schema", None))
    return Task(
        name=str(name),
        input=task_input if isinstance(task_input, dict) else {column: task_input},
        expected=expected,
        instruction="" if instruction is None else str(instruction),
        metadata=_metadata(file, where, rest),
        expected_schema=schema,
    )


def _metadata(file: Path, where: str, rest: dict[str, Any]) -> dict[str, Any]:
    """The row's other columns; a ``metadata`` object column is merged in, not nested."""
    nested = rest.pop("metadata", None)
    if isinstance(nested, str) and nested.strip().startswith("{"):  # a CSV cell
        nested = _json(file, nested, f"{where}, column 'metadata'")
    if nested is None or nested == "":
        return rest
    if not isinstance(nested, dict):
        raise UserError(
            f"dataset file {file}, {where}: column 'metadata' must be an object of fields, "
            f'got {type(nested).__name__}; write it as {{"key": value}} or use plain columns'
        )
    clash = sorted(set(nested) & set(rest))
    if clash:
        raise UserError(
            f"dataset file {file}, {where}: metadata field(s) {', '.join(clash)} are both a "
            "column and a key of the 'metadata' column; keep one of them"
        )
    return {**nested, **rest}


def _schema(file: Path, where: str, value: Any) -> dict[str, Any] | None:
    """The row's ``expected_schema``: a JSON Schema object (JSON text in a CSV cell)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = _json(file, value, f"{where}, column 'expected_schema'")
    if not isinstance(value, dict):
        raise UserError(
            f"dataset file {file}, {where}: column 'expected_schema' must be a JSON Schema "
            f'object such as {{"type": "object", "required": ["order_id"]}}, '
            f"got {type(value).__name__}"
        )
    return value


def _is_missing(value: Any) -> bool:
    """Null, a blank string (an empty CSV cell) or an empty list/object: nothing to work on."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, list | dict) and not value


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "empty" if not value else "blank"
    return f"an empty {'list' if isinstance(value, list) else 'object'}"


def _pop_first(row: dict[str, Any], columns: tuple[str, ...]) -> Any:
    for column in columns:
        if column in row:
            return row.pop(column)
    return None
