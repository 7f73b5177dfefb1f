"""The program fingerprint is stable, and changes with everything that changes a result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from container import Splits, build_served_program, load_target
from tests.container.conftest import make_target, write_jsonl

MODULE = """
from container import Registry, optimize

REGISTRY = Registry()


@optimize(id="fp-target", baseline="Answer.", registry=REGISTRY)
def answer(task, candidate):
    return {body}
"""


def _fingerprint(target: Any, dataset: Path, **kwargs: Any) -> str:
    return build_served_program(target, dataset=dataset, **kwargs).program.fingerprint


def _module(tmp_path: Path, name: str, body: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE.format(body=body))
    return load_target(str(path))


def _echo(task: Any, candidate: Any) -> str:
    return str(task.input)


def test_stable_for_the_same_inputs(dataset_path: Path) -> None:
    first = _fingerprint(make_target(_echo), dataset_path)
    assert first == _fingerprint(make_target(_echo), dataset_path)
    assert len(first) == 64 and int(first, 16) >= 0


def test_changes_with_the_dataset(
    tmp_path: Path, dataset_path: Path, rows: list[dict[str, Any]]
) -> None:
    rows[3]["label"] = "lost_card"
    edited = write_jsonl(tmp_path / "edited.jsonl", rows)
    assert _fingerprint(make_target(_echo), dataset_path) != _fingerprint(
        make_target(_echo), edited
    )


def test_changes_with_the_verifier(tmp_path: Path, dataset_path: Path) -> None:
    target = make_target(_echo)
    default = _fingerprint(target, dataset_path)
    exact = _fingerprint(target, dataset_path, verifier={"type": "exact"})
    loose = _fingerprint(target, dataset_path, verifier={"type": "numeric", "abs_tol": 1})
    tight = _fingerprint(target, dataset_path, verifier={"type": "numeric", "abs_tol": 0.1})
    assert len({default, exact, loose, tight}) == 4
    assert default == _fingerprint(target, dataset_path, verifier="normalized")


def test_changes_with_a_python_verifier_source(dataset_path: Path) -> None:
    def lenient(task: Any, result: Any) -> float:
        return 1.0

    def strict(task: Any, result: Any) -> float:
        return 0.0

    target = make_target(_echo)
    assert _fingerprint(target, dataset_path, verifier=lenient) != _fingerprint(
        target, dataset_path, verifier=strict
    )


def test_changes_with_the_baseline_kind_and_version(dataset_path: Path) -> None:
    prints = {
        _fingerprint(make_target(_echo), dataset_path),
        _fingerprint(make_target(_echo, baseline="Another baseline."), dataset_path),
        _fingerprint(make_target(_echo, kind="agent"), dataset_path),
        _fingerprint(make_target(_echo, version="student-v2"), dataset_path),
    }
    assert len(prints) == 4


def test_changes_with_the_splits(tmp_path: Path, dataset_path: Path) -> None:
    target = make_target(_echo)
    splits_file = tmp_path / "splits.json"
    splits_file.write_text(json.dumps({"train": ["row-0", "row-1"], "holdout": ["row-2"]}))
    assert _fingerprint(target, dataset_path) != _fingerprint(
        target, dataset_path, splits=splits_file
    )
    assert _fingerprint(target, dataset_path, splits=splits_file) == _fingerprint(
        target, dataset_path, splits=Splits(train=("row-0", "row-1"), holdout=("row-2",))
    )


def test_changes_with_the_target_code(tmp_path: Path, dataset_path: Path) -> None:
    one = _module(tmp_path, "fp_one", "str(task.input)")
    same = _module(tmp_path, "fp_same", "str(task.input)")
    other = _module(tmp_path, "fp_other", "str(task.input).upper()")
    assert one.id == same.id == other.id == "fp-target"
    assert _fingerprint(one, dataset_path) == _fingerprint(same, dataset_path)
    assert _fingerprint(one, dataset_path) != _fingerprint(other, dataset_path)
