"""Banking77 rows, its 77 labels, and the deterministic stratified seed splits.

Seeds are named after their row in the shipped CSV (``b77-train-00042`` is line 42 of
``train.csv`` after the header, counting from 0), so a seed can always be traced to its source.
The train split samples ``train.csv`` and the holdout split samples ``test.csv``. Both walk
one shuffled label order round-robin, so every label gets ``size // 77`` or one more queries,
and a smaller split's labels are a prefix of a larger one's: with the defaults (24 train,
40 holdout) the holdout covers the 24 train labels plus 16 it never trained on.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from schemas import UserError

__all__ = [
    "DATA_DIR",
    "GROUPS",
    "Example",
    "SampleConfig",
    "examples_by_label",
    "load_examples",
    "load_labels",
    "parse_intents",
    "prepare_dataset",
    "stratified_sample",
]

DATA_DIR = Path(__file__).resolve().parent
_PREFIX = {"train": "b77-train", "test": "b77-test"}


@dataclass(frozen=True)
class Example:
    """One labelled query: its seed name, text and intent label."""

    name: str
    text: str
    label: str


@dataclass(frozen=True)
class SampleConfig:
    """How many train and holdout seeds to sample, and the sampling seed.

    Defaults: 24 train seeds (a GEPA run re-evaluates the train split for each accepted
    child, ~12 s on the local 0.5B) and 40 holdout seeds (one per label for 40 labels, 2.5
    points per query: the resolution the promotion report needs, in ~20 s).
    """

    train_size: int = 24
    holdout_size: int = 40
    seed: int = 0
    # The intents the task keeps (empty: all 77), in categories.json order: the student's
    # label list, and the only labels the splits are drawn from.
    intents: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SampleConfig:
        """Sizes from ``B77_TRAIN_SIZE``, ``B77_HOLDOUT_SIZE``, ``B77_SEED``; the intents from
        ``B77_INTENTS`` (comma-separated label names, or the name of a group in ``GROUPS``)."""
        env = os.environ if environ is None else environ
        default = cls()
        return cls(
            train_size=_int(env, "B77_TRAIN_SIZE", default.train_size),
            holdout_size=_int(env, "B77_HOLDOUT_SIZE", default.holdout_size),
            seed=_int(env, "B77_SEED", default.seed),
            intents=parse_intents(env.get("B77_INTENTS", "")),
        )

    def labels(self, data_dir: Path = DATA_DIR) -> tuple[str, ...]:
        """The task's labels: ``intents`` (checked against the 77), or all of them."""
        every = load_labels(data_dir)
        if not self.intents:
            return every
        unknown = [i for i in self.intents if i not in every]
        if unknown:
            raise UserError(
                f"unknown Banking77 intents {unknown}: use names from categories.json "
                f"(e.g. {', '.join(every[:3])}) or a group: {', '.join(GROUPS)}"
            )
        return tuple(label for label in every if label in self.intents)


# Named subsets of the 77 intents. ``cards``: every intent about a card (27): one team's
# queue, and the intents a small student confuses most with each other.
GROUPS: dict[str, tuple[str, ...]] = {
    "cards": (
        "activate_my_card", "apple_pay_or_google_pay", "card_about_to_expire", "card_acceptance",
        "card_arrival", "card_delivery_estimate", "card_linking", "card_not_working",
        "card_payment_fee_charged", "card_payment_not_recognised",
        "card_payment_wrong_exchange_rate", "card_swallowed", "compromised_card",
        "contactless_not_working", "declined_card_payment", "disposable_card_limits",
        "get_disposable_virtual_card", "get_physical_card", "getting_spare_card",
        "getting_virtual_card", "lost_or_stolen_card", "order_physical_card",
        "pending_card_payment", "reverted_card_payment?", "top_up_by_card_charge",
        "virtual_card_not_working", "visa_or_mastercard",
    ),
}  # fmt: skip


def parse_intents(text: str) -> tuple[str, ...]:
    """``B77_INTENTS``/``--intents``: a group's name, or comma-separated intents ('' = all)."""
    text = text.strip()
    if text in GROUPS:
        return GROUPS[text]
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"{key} must be an integer, got {raw!r}") from None


def load_labels(data_dir: Path = DATA_DIR) -> tuple[str, ...]:
    """The 77 intent labels, in ``categories.json`` order."""
    return tuple(json.loads((data_dir / "categories.json").read_text(encoding="utf-8")))


def load_examples(split: str, data_dir: Path = DATA_DIR) -> tuple[Example, ...]:
    """Every row of ``train.csv`` or ``test.csv`` (``split`` is ``train`` or ``test``)."""
    if split not in _PREFIX:
        raise UserError(f"unknown Banking77 file {split!r}; use train or test")
    with (data_dir / f"{split}.csv").open(encoding="utf-8", newline="") as fh:
        return tuple(
            Example(f"{_PREFIX[split]}-{i:05d}", row["text"], row["category"])
            for i, row in enumerate(csv.DictReader(fh))
        )


def examples_by_label(examples: Sequence[Example]) -> dict[str, list[str]]:
    """Query texts per label, in file order."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for example in examples:
        grouped[example.label].append(example.text)
    return dict(grouped)


def stratified_sample(
    examples: Sequence[Example], size: int, labels: Sequence[str], *, seed: int, split: str
) -> list[Example]:
    """``size`` examples spread evenly over ``labels``; the same arguments give the same list.

    The label order is shuffled by ``seed`` alone (shared by every split); the queries within
    a label are shuffled by ``seed`` and ``split``. The result is in file order.
    """
    if size < 0:
        raise UserError(f"{split} size must be >= 0, got {size}")
    if size > len(examples):
        raise UserError(f"{split} size {size} is more than the {len(examples)} rows available")
    order = list(labels)
    random.Random(seed).shuffle(order)
    pools: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        pools[example.label].append(example)
    rng = random.Random(f"{seed}:{split}")
    for label in order:
        rng.shuffle(pools[label])
    picked: list[Example] = []
    depth = 0
    while len(picked) < size:
        for label in order:
            if depth < len(pools[label]) and len(picked) < size:
                picked.append(pools[label][depth])
        depth += 1
    position = {e.name: i for i, e in enumerate(examples)}
    return sorted(picked, key=lambda e: position[e.name])


def prepare_dataset(
    config: SampleConfig, out_dir: Path | None = None, data_dir: Path = DATA_DIR
) -> Path:
    """Write the sampled seeds as a dataset folder (``train.jsonl``, ``holdout.jsonl``).

    The folder's split files define the splits for the container SDK. ``out_dir`` defaults
    to ``$B77_DATA_DIR`` or ``~/.cache/gepa-runtime/banking77``, one subfolder per config;
    files are rewritten atomically each time, so they never go stale.
    """
    base = out_dir or Path(
        os.environ.get("B77_DATA_DIR") or Path.home() / ".cache" / "gepa-runtime" / "banking77"
    )
    labels = config.labels(data_dir)
    subset = ""
    if config.intents:
        digest = hashlib.sha256(",".join(labels).encode()).hexdigest()[:8]
        subset = f"-intents{len(labels)}-{digest}"
    folder = (
        base / f"train{config.train_size}-holdout{config.holdout_size}-seed{config.seed}{subset}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    for split, source, size in (
        ("train", "train", config.train_size),
        ("holdout", "test", config.holdout_size),
    ):
        pool = [e for e in load_examples(source, data_dir) if e.label in labels]
        rows = stratified_sample(pool, size, labels, seed=config.seed, split=split)
        text = "".join(
            json.dumps({"name": e.name, "text": e.text, "category": e.label}) + "\n" for e in rows
        )
        _write_atomic(folder / f"{split}.jsonl", text)
    return folder


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
