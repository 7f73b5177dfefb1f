"""Dataset loading: formats, column mapping, names and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from container import load_dataset
from schemas import UserError
from tests.container.conftest import write_jsonl


def test_jsonl_column_mapping_and_metadata(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"question": "2+2?", "answer": "4", "instruction": "Add.", "source": "gsm", "level": 1},
            {"name": "custom", "query": "capital of France", "target": "Paris"},
            {"prompt": "no expected"},
        ],
    )
    data = load_dataset(path)
    first, second, third = data.tasks
    assert (first.name, first.input, first.expected, first.instruction) == (
        "qa-00000",
        {"question": "2+2?"},
        "4",
        "Add.",
    )
    assert dict(first.metadata) == {"source": "gsm", "level": 1}
    assert (second.name, second.input, second.expected) == (
        "custom",
        {"query": "capital of France"},
        "Paris",
    )
    assert (third.name, third.expected, third.instruction) == ("qa-00002", None, "")
    assert data.get("custom") is second and "qa-00000" in data and len(data) == 3


def test_first_matching_column_wins_and_the_rest_is_metadata(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"id": 7, "input": "a", "text": "b", "label": "x", "output": "y"}]
    )
    (task,) = load_dataset(path).tasks
    assert (task.name, task.input, task.expected) == ("7", {"input": "a"}, "x")
    assert dict(task.metadata) == {"text": "b", "output": "y"}


def test_json_list_and_csv(tmp_path: Path) -> None:
    (tmp_path / "rows.json").write_text(json.dumps([{"text": "hi", "category": "greet"}]))
    (tmp_path / "rows.csv").write_text(
        'id,text,label,note\nc1,"multi\nline",spam,x\nc2,plain,ham,\n', encoding="utf-8"
    )
    (task,) = load_dataset(tmp_path / "rows.json").tasks
    assert (task.name, task.input, task.expected) == ("rows-00000", {"text": "hi"}, "greet")
    c1, c2 = load_dataset(tmp_path / "rows.csv").tasks
    assert (c1.name, c1.input, c1.expected, dict(c1.metadata)) == (
        "c1",
        {"text": "multi\nline"},
        "spam",
        {"note": "x"},
    )
    assert (c2.name, c2.expected) == ("c2", "ham")


def test_folder_reads_every_file_in_name_order(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "b.jsonl", [{"text": "b0"}])
    write_jsonl(tmp_path / "a.jsonl", [{"text": "a0"}, {"text": "a1"}])
    (tmp_path / "splits.json").write_text("{}")  # a companion file, not data
    (tmp_path / "notes.txt").write_text("ignored")
    data = load_dataset(tmp_path)
    assert [t.name for t in data.tasks] == ["a-00000", "a-00001", "b-00000"]
    assert data.file_splits is None


def test_folder_split_files_define_splits(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "x"}, {"text": "y"}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": "z"}])
    (tmp_path / "validation.csv").write_text("text\nw\n")
    data = load_dataset(tmp_path)
    assert data.file_splits == {
        "holdout": ("test-00000",),
        "train": ("train-00000", "train-00001"),
        "val": ("validation-00000",),
    }


def test_folder_mixing_split_and_other_files_is_an_error(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "x"}])
    write_jsonl(tmp_path / "extra.jsonl", [{"text": "y"}])
    with pytest.raises(UserError, match="extra.jsonl"):
        load_dataset(tmp_path)


def test_missing_input_column_names_the_columns_found(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"body": "x", "label": "y"}])
    with pytest.raises(UserError) as info:
        load_dataset(path)
    assert "body, label" in str(info.value) and "input, text, question" in str(info.value)


@pytest.mark.parametrize(
    ("name", "content", "where", "column", "state"),
    [
        (
            "d.jsonl",
            '{"text": "a"}\n\n{"id": "b", "text": null}\n',
            "row 2 (line 3)",
            "text",
            "null",
        ),
        (
            "d.jsonl",
            '{"text": "a"}\n{"input": "  ", "label": "x"}\n',
            "row 2 (line 2)",
            "input",
            "blank",
        ),
        ("d.json", '[{"text": "a"}, {"question": {}}]', "item 1", "question", "an empty object"),
        ("d.csv", "id,text,label\nr1,hello,x\nr2,,y\n", "row 2 (line 3)", "text", "empty"),
    ],
)
def test_a_row_with_a_missing_input_is_refused_with_its_row_number_and_the_fix(
    tmp_path: Path, name: str, content: str, where: str, column: str, state: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UserError) as info:
        load_dataset(path)
    message = str(info.value)
    assert f"{path}, {where}" in message
    assert f"its input column {column!r} is {state}" in message
    assert "fill it in or remove the row" in message


def test_duplicate_names_are_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "text": "1"}, {"id": "a", "text": "2"}])
    with pytest.raises(UserError, match="duplicate row names: a"):
        load_dataset(path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"text": "ok"}\n{not json\n', r"row 2 \(line 2\): invalid JSON"),
        ("bad.json", '{"text": "not a list"}', "must hold a JSON list"),
        ("bad.json", "[1, 2]", "item 0: expected an object"),
        ("bad.csv", "text,label\na,b,c\n", r"row 1 \(line 2\): more values than header"),
        ("bad.txt", "text", "unsupported file type"),
        ("empty.jsonl", "\n", "has no rows"),
    ],
)
def test_unreadable_files_are_user_errors(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_dataset(path)


def test_missing_path_and_non_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "latin.csv").write_bytes("text\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match="cannot read dataset file"):
        load_dataset(tmp_path / "latin.csv")
