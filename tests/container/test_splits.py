"""Splits: from a file, from split files, and the deterministic stratified default."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from container import Dataset, Splits, default_splits, load_dataset, load_splits
from schemas import UserError
from tests.container.conftest import write_jsonl


def _dataset(tmp_path: Path, labels: list[str], name: str = "d.jsonl") -> Dataset:
    rows = [{"id": f"r{i:03d}", "text": str(i), "label": label} for i, label in enumerate(labels)]
    return load_dataset(write_jsonl(tmp_path / name, rows))


def test_splits_file(tmp_path: Path) -> None:
    data = _dataset(tmp_path, ["a"] * 4)
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": ["r000", "r001"], "val": ["r002"], "test": ["r003"]}))
    splits = load_splits(data, path)
    assert splits == Splits(train=("r000", "r001"), val=("r002",), holdout=("r003",))
    assert splits.split_of("r003") == "holdout" and splits.split_of("zzz") is None
    assert splits.to_seeds().model_dump() == splits.as_dict()


def test_unknown_names_in_splits_file_are_listed(tmp_path: Path) -> None:
    data = _dataset(tmp_path, ["a"] * 3)
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": ["r000", "ghost-1"], "holdout": ["ghost-2"]}))
    with pytest.raises(UserError) as info:
        load_splits(data, path)
    assert "2 seed(s) not in the dataset: ghost-1, ghost-2" in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"train": ["r000"], "extra": []}', "unknown split extra"),
        ('{"train": "r000"}', "must be a list of seed names"),
        ('{"train": ["r000"], "holdout": ["r000"]}', "in both train and holdout"),
        ('{"holdout": ["r000"]}', "train split is empty"),
        ('["r000"]', "must be an object"),
        ("{oops", "not valid JSON"),
    ],
)
def test_bad_splits_files(tmp_path: Path, content: str, message: str) -> None:
    data = _dataset(tmp_path, ["a"] * 3)
    path = tmp_path / "splits.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_splits(data, path)


def test_missing_splits_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read splits file"):
        load_splits(_dataset(tmp_path, ["a"]), tmp_path / "nope.json")


def test_split_files_in_a_folder_are_used(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "x"}, {"text": "y"}])
    write_jsonl(tmp_path / "holdout.jsonl", [{"text": "z"}])
    splits = load_splits(load_dataset(tmp_path))
    assert splits == Splits(train=("train-00000", "train-00001"), holdout=("holdout-00000",))


def test_default_split_is_stratified_60_20_20(tmp_path: Path) -> None:
    labels = ["a"] * 50 + ["b"] * 25 + ["c"] * 25
    data = _dataset(tmp_path, labels)
    splits = load_splits(data)
    assert (len(splits.train), len(splits.val), len(splits.holdout)) == (60, 20, 20)
    label_of = {t.name: t.expected for t in data.tasks}
    for split, size in (("train", 60), ("val", 20), ("holdout", 20)):
        counts = Counter(label_of[n] for n in getattr(splits, split))
        assert counts == {"a": size // 2, "b": size // 4, "c": size // 4}, split
    assert set(splits.train) | set(splits.val) | set(splits.holdout) == set(label_of)
    order = [t.name for t in data.tasks]
    assert list(splits.train) == sorted(splits.train, key=order.index)  # dataset order


def test_default_split_never_changes_and_depends_on_seed(tmp_path: Path) -> None:
    labels = [str(i % 7) for i in range(40)]
    data = _dataset(tmp_path, labels)
    again = _dataset(tmp_path, labels, name="copy.jsonl")
    assert load_splits(data) == load_splits(again)
    assert default_splits(data, seed=0) == load_splits(data)
    assert default_splits(data, seed=1) != default_splits(data, seed=0)


def test_unique_labels_still_get_a_holdout(tmp_path: Path) -> None:
    splits = load_splits(_dataset(tmp_path, [f"answer-{i}" for i in range(10)]))
    assert (len(splits.train), len(splits.val), len(splits.holdout)) == (6, 2, 2)


@pytest.mark.parametrize(("n", "sizes"), [(1, (1, 0, 0)), (2, (2, 0, 0)), (3, (1, 1, 1))])
def test_tiny_datasets_keep_one_train_seed(
    tmp_path: Path, n: int, sizes: tuple[int, int, int]
) -> None:
    splits = load_splits(_dataset(tmp_path, ["a"] * n))
    assert (len(splits.train), len(splits.val), len(splits.holdout)) == sizes
