"""Which seeds are ``train``, ``val`` and ``holdout``.

In order of precedence: a splits file ``{"train": [...], "val": [...], "holdout": [...]}``,
the dataset folder's split files (``train.jsonl`` ...), or a deterministic stratified
default: rows are grouped by their expected value, spread evenly through one interleaved
order (so every label is represented in proportion) and cut 60/20/20, with at least one
train seed. The order depends only on the row names and ``seed``, so it never changes
between runs and adding a row moves few others.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from container.dataset import SPLIT_STEMS, Dataset
from schemas import Seeds, UserError

__all__ = ["SPLIT_NAMES", "Splits", "default_splits", "load_splits"]

SPLIT_NAMES = ("train", "val", "holdout")


@dataclass(frozen=True)
class Splits:
    """Seed names per split, each in dataset order."""

    train: tuple[str, ...]
    val: tuple[str, ...] = ()
    holdout: tuple[str, ...] = ()

    def split_of(self, name: str) -> str | None:
        """``train``, ``val``, ``holdout``, or ``None`` for a row in no split."""
        for split in SPLIT_NAMES:
            if name in getattr(self, split):
                return split
        return None

    def as_dict(self) -> dict[str, list[str]]:
        """The splits as plain lists, keyed by split name."""
        return {s: list(getattr(self, s)) for s in SPLIT_NAMES}

    def to_seeds(self) -> Seeds:
        """The wire form served in ``GET /program``."""
        return Seeds(**self.as_dict())


def load_splits(
    dataset: Dataset, splits_file: str | Path | None = None, *, seed: int = 0
) -> Splits:
    """The splits of ``dataset``: from ``splits_file``, from split files, or the default."""
    if splits_file is not None:
        return _from_mapping(dataset, _read(Path(splits_file)), str(splits_file))
    if dataset.file_splits:
        return _from_mapping(dataset, dict(dataset.file_splits), dataset.source)
    return default_splits(dataset, seed=seed)


def default_splits(
    dataset: Dataset, *, seed: int = 0, fractions: tuple[float, float] = (0.2, 0.2)
) -> Splits:
    """Stratified by expected value: ``fractions`` are (val, holdout); train gets the rest."""
    groups: dict[str, list[str]] = defaultdict(list)
    for task in dataset.tasks:
        groups[json.dumps(task.expected, sort_keys=True, default=str)].append(task.name)
    keyed: list[tuple[float, str, str]] = []
    for names in groups.values():
        ordered = sorted(names, key=lambda n: _hash(seed, n))
        keyed.extend(((i + 0.5) / len(ordered), _hash(seed, n), n) for i, n in enumerate(ordered))
    order = [name for _, _, name in sorted(keyed)]
    n = len(order)
    n_val, n_holdout = (int(f * n + 0.5) for f in fractions)
    while n - n_val - n_holdout < 1 and (n_val or n_holdout):
        if n_val:
            n_val -= 1
        else:
            n_holdout -= 1
    n_train = n - n_val - n_holdout
    position = {t.name: i for i, t in enumerate(dataset.tasks)}

    def pick(names: list[str]) -> tuple[str, ...]:
        return tuple(sorted(names, key=position.__getitem__))

    return Splits(
        train=pick(order[:n_train]),
        val=pick(order[n_train : n_train + n_val]),
        holdout=pick(order[n_train + n_val :]),
    )


def _hash(seed: int, name: str) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read splits file {path}: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"splits file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UserError(
            f'splits file {path} must be an object like {{"train": [...], "holdout": [...]}}'
        )
    return data


def _from_mapping(dataset: Dataset, data: dict[str, Any], where: str) -> Splits:
    unknown_keys = sorted(k for k in data if k not in SPLIT_STEMS)
    if unknown_keys:
        raise UserError(
            f"splits in {where}: unknown split {', '.join(unknown_keys)}; use train, val, holdout"
        )
    splits: dict[str, list[str]] = {s: [] for s in SPLIT_NAMES}
    for key, names in data.items():
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise UserError(f"splits in {where}: {key!r} must be a list of seed names")
        splits[SPLIT_STEMS[key]].extend(names)
    missing = sorted({n for names in splits.values() for n in names if n not in dataset})
    if missing:
        shown = ", ".join(missing[:20]) + (
            f" (+{len(missing) - 20} more)" if len(missing) > 20 else ""
        )
        raise UserError(
            f"splits in {where} name {len(missing)} seed(s) not in the dataset: {shown}"
        )
    seen: dict[str, str] = {}
    for split, names in splits.items():
        for name in names:
            if seen.get(name, split) != split:
                raise UserError(
                    f"splits in {where}: seed {name!r} is in both {seen[name]} and {split}"
                )
            seen[name] = split
    if not splits["train"]:
        raise UserError(f"splits in {where}: the train split is empty")
    return Splits(**{s: tuple(dict.fromkeys(names)) for s, names in splits.items()})
