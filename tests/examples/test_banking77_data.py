"""Banking77 seeds: stratified, deterministic, traceable to the shipped CSV files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from container import load_dataset, load_splits
from examples.banking77 import (
    GROUPS,
    SampleConfig,
    load_examples,
    load_labels,
    parse_intents,
    prepare_dataset,
    stratified_sample,
)
from schemas import UserError

LABELS = load_labels()
TRAIN = load_examples("train")
TEST = load_examples("test")


def test_shipped_files_are_the_full_dataset() -> None:
    assert len(LABELS) == 77
    assert len(TRAIN) == 10_003
    assert len(TEST) == 3_080
    assert Counter(e.label for e in TEST) == {label: 40 for label in LABELS}
    assert TRAIN[0].name == "b77-train-00000"
    assert TRAIN[0].text == "I am still waiting on my card?"


def test_sample_spreads_labels_evenly() -> None:
    small = stratified_sample(TRAIN, 24, LABELS, seed=0, split="train")
    assert len({e.label for e in small}) == 24  # one query each from 24 labels
    big = stratified_sample(TRAIN, 200, LABELS, seed=0, split="train")
    counts = Counter(e.label for e in big)
    assert set(counts) == set(LABELS)
    assert set(counts.values()) == {2, 3}  # 200 = 77 * 2 + 46


def test_sample_is_deterministic_and_depends_on_the_seed() -> None:
    first = stratified_sample(TRAIN, 30, LABELS, seed=0, split="train")
    again = stratified_sample(TRAIN, 30, LABELS, seed=0, split="train")
    other = stratified_sample(TRAIN, 30, LABELS, seed=1, split="train")
    assert first == again
    assert first != other
    names = [e.name for e in first]
    assert names == sorted(names)  # file order


def test_holdout_labels_include_the_train_labels() -> None:
    train = stratified_sample(TRAIN, 24, LABELS, seed=3, split="train")
    holdout = stratified_sample(TEST, 40, LABELS, seed=3, split="holdout")
    assert {e.label for e in train} < {e.label for e in holdout}
    assert all(e.name.startswith("b77-test-") for e in holdout)


def test_sample_rejects_impossible_sizes() -> None:
    with pytest.raises(UserError, match="more than the 3080 rows"):
        stratified_sample(TEST, 5000, LABELS, seed=0, split="holdout")
    with pytest.raises(UserError, match=">= 0"):
        stratified_sample(TEST, -1, LABELS, seed=0, split="holdout")


def test_prepared_folder_defines_the_splits_for_the_sdk(tmp_path: Path) -> None:
    folder = prepare_dataset(SampleConfig(train_size=10, holdout_size=12, seed=5), tmp_path)
    assert folder.name == "train10-holdout12-seed5"
    dataset = load_dataset(folder)
    splits = load_splits(dataset)
    assert len(splits.train) == 10 and len(splits.holdout) == 12
    row = json.loads((folder / "train.jsonl").read_text().splitlines()[0])
    source = {e.name: e for e in TRAIN}[row["name"]]
    assert (row["text"], row["category"]) == (source.text, source.label)
    task = dataset.get(row["name"])
    assert (
        task is not None and task.expected == source.label and task.input == {"text": source.text}
    )


def test_sample_config_reads_the_environment() -> None:
    env = {"B77_TRAIN_SIZE": "8", "B77_HOLDOUT_SIZE": "16", "B77_SEED": "2"}
    assert SampleConfig.from_env(env) == SampleConfig(8, 16, 2)
    assert SampleConfig.from_env({}) == SampleConfig(24, 40, 0)
    with pytest.raises(UserError, match="B77_TRAIN_SIZE"):
        SampleConfig.from_env({"B77_TRAIN_SIZE": "many"})


def test_a_subset_of_intents_is_the_only_label_list_and_the_only_source(tmp_path: Path) -> None:
    sample = SampleConfig(train_size=54, holdout_size=216, seed=3, intents=GROUPS["cards"])
    labels = sample.labels()
    assert len(labels) == 27 and list(labels) == [x for x in LABELS if x in GROUPS["cards"]]
    folder = prepare_dataset(sample, tmp_path)
    assert folder.name.startswith("train54-holdout216-seed3-intents27-")
    for split, per_intent in (("train", 2), ("holdout", 8)):
        rows = [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]
        counts = Counter(r["category"] for r in rows)
        assert set(counts) == set(labels) and set(counts.values()) == {per_intent}
    # Another subset is another folder: the same sizes and seed cannot mix up two tasks.
    two = prepare_dataset(SampleConfig(54, 80, 3, ("card_arrival", "card_linking")), tmp_path)
    assert two.name.startswith("train54-holdout80-seed3-intents2-")
    with pytest.raises(UserError, match="holdout size 81 is more than the 80 rows available"):
        prepare_dataset(SampleConfig(54, 81, 3, ("card_arrival", "card_linking")), tmp_path)


def test_intents_are_read_by_group_or_by_name_and_unknown_ones_are_refused() -> None:
    assert parse_intents("cards") == GROUPS["cards"]
    assert parse_intents(" card_arrival, card_linking ,card_arrival") == (
        "card_arrival",
        "card_linking",
    )
    assert parse_intents("") == () and SampleConfig().labels() == LABELS
    env = {"B77_INTENTS": "cards"}
    assert SampleConfig.from_env(env).intents == GROUPS["cards"]
    with pytest.raises(UserError, match=r"unknown Banking77 intents \['card_arival'\].*cards"):
        SampleConfig(intents=("card_arival",)).labels()
