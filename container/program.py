"""One served program: a target with its dataset, splits and verifier, and its ``Program`` body."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from container.checks import served_warnings
from container.dataset import Dataset, load_dataset
from container.fingerprint import compute_fingerprint
from container.splits import Splits, load_splits
from container.target import Target
from container.verifiers import Verifier, load_verifier
from schemas import Component, Program, UserError

__all__ = ["ServedProgram", "build_served_program"]


@dataclass(frozen=True)
class ServedProgram:
    """Everything a container needs to answer ``/program`` and ``/rollout``.

    ``warnings`` are what the user should hear before optimizing (an empty holdout split,
    rows that every rollout would refuse): printed at start, served as ``metadata.warnings``.
    """

    target: Target
    dataset: Dataset
    splits: Splits
    verifier: Verifier
    program: Program
    warnings: tuple[str, ...] = ()


def _metadata(target: Target, size: int, verifier: str, warnings: list[str]) -> dict[str, object]:
    metadata: dict[str, object] = {"dataset_size": size, "verifier": verifier}
    template = target.template_metadata()
    if template is not None:
        metadata["template"] = template
    if warnings:
        metadata["warnings"] = warnings
    return metadata


def build_served_program(
    target: Target,
    *,
    dataset: Dataset | str | Path | None = None,
    splits: Splits | str | Path | None = None,
    verifier: Any = None,
) -> ServedProgram:
    """Load what is given as paths and fill the defaults.

    ``dataset`` defaults to the decorator's ``dataset=``; ``splits`` to the dataset's split
    files or the stratified default; ``verifier`` to the decorator's, else ``normalized``.
    """
    source = dataset if dataset is not None else target.dataset
    if source is None:
        raise UserError(
            f"target {target.id!r} has no dataset; pass --dataset PATH or @optimize(dataset=...)"
        )
    data = source if isinstance(source, Dataset) else load_dataset(source)
    split = splits if isinstance(splits, Splits) else load_splits(data, splits)
    scorer = load_verifier(verifier if verifier is not None else target.verifier)
    warnings = served_warnings(data, split, scorer, target.template)
    program = Program(
        program_id=target.id,
        fingerprint=compute_fingerprint(target, data, split, scorer),
        description=target.description,
        components=[
            Component(
                name=name,
                kind=target.kind,  # type: ignore[arg-type]
                description=target.component_description(name),
                text=text,
            )
            for name, text in target.baseline.items()
        ],
        seeds=split.to_seeds(),
        objectives=target.declared_objectives(),
        metadata=_metadata(target, len(data), scorer.name, warnings),
    )
    return ServedProgram(
        target=target,
        dataset=data,
        splits=split,
        verifier=scorer,
        program=program,
        warnings=tuple(warnings),
    )
