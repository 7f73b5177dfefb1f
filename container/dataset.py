"""Datasets: JSONL, JSON (a list of objects), CSV files, or a folder of them -> ``Task`` rows.

Column mapping (the first column present wins, the rest go to ``metadata``):

- name: ``name`` | ``id``; otherwise ``<file stem>-<row index, 5 digits>``
- input: ``input`` | ``text`` | ``question`` | ``query`` | ``prompt`` (required)
- expected: ``expected`` | ``label`` | ``answer`` | ``category`` | ``output`` | ``target``
- instruction: ``instruction`` (optional)

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
EXPECTED_COLUMNS = ("expected", "label", "answer", "category", "output", "target")
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
        rows = [_task(file, i, row) for i, row in enumerate(_read(file))]
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


def _read(file: Path) -> Iterator[dict[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read dataset file {file}: {exc}") from exc
    suffix = file.suffix.lower()
    if suffix == ".csv":
        try:
            for i, row in enumerate(csv.DictReader(io.StringIO(text, newline=""))):
                if None in row:
                    raise UserError(
                        f"dataset file {file}, row {i}: more values than header columns"
                    )
                yield row
        except csv.Error as exc:
            raise UserError(f"dataset file {file}: invalid CSV ({exc})") from exc
        return
    if suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield _object(file, _json(file, line, f"line {lineno}"), f"line {lineno}")
        return
    data = _json(file, text, "file")
    if not isinstance(data, list):
        raise UserError(
            f"dataset file {file} must hold a JSON list of objects, got {type(data).__name__}"
        )
    for i, item in enumerate(data):
        yield _object(file, item, f"item {i}")


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


def _task(file: Path, index: int, row: dict[str, Any]) -> Task:
    rest = dict(row)
    name = _pop_first(rest, NAME_COLUMNS)
    if name is None or str(name) == "":
        name = f"{file.stem}-{index:05d}"
    if not any(c in rest for c in INPUT_COLUMNS):
        raise UserError(
            f"dataset file {file}, row {index}: no input column; expected one of "
            f"{', '.join(INPUT_COLUMNS)}, found: {', '.join(map(str, row)) or 'no columns'}"
        )
    task_input = _pop_first(rest, INPUT_COLUMNS)
    expected = _pop_first(rest, EXPECTED_COLUMNS)
    instruction = rest.pop("instruction", "")
    return Task(
        name=str(name),
        input=task_input,
        expected=expected,
        instruction="" if instruction is None else str(instruction),
        metadata=rest,
    )


def _pop_first(row: dict[str, Any], columns: tuple[str, ...]) -> Any:
    for column in columns:
        if column in row:
            return row.pop(column)
    return None
