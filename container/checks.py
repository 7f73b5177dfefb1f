"""Mistakes in the served rows that are known before any rollout, and the warnings they give.

A row whose input lacks a field the user template names, or that has no expected value
under a verifier that compares with one, fails the same way on every rollout: the rollout
answers 422 (``UserMistake``) and the container says so at start (``served_warnings``, shown
on stderr and as ``metadata.warnings`` of ``GET /program``), so the optimizer's dry-run can
report it before any budget is spent. An empty holdout split is warned about the same way.
"""

from __future__ import annotations

from container.dataset import Dataset
from container.faults import UserMistake
from container.splits import Splits
from container.task import Task
from container.verifiers import Verifier, missing_label_fix
from schemas import PromptTemplate
from schemas.template import placeholders

__all__ = ["check_row_fits", "served_warnings", "template_problem"]

EXAMPLES = 5


def template_problem(template: PromptTemplate, task: Task) -> str | None:
    """Why ``task``'s input cannot fill ``template``'s user template, or ``None`` if it can."""
    fields = task.fields
    missing = [name for name in placeholders(template.user_template) if name not in fields]
    if not missing:
        return None
    have = ", ".join(sorted(fields)) or "none"
    return (
        f"user_template {template.user_template!r} needs field(s) {', '.join(missing)} but "
        f"the row has: {have}; add the field(s) to the row or change the template's "
        "placeholders"
    )


def check_row_fits(template: PromptTemplate | None, task: Task) -> None:
    """Raise ``UserMistake("TemplateMismatch")`` when ``task`` cannot be rendered."""
    if template is None:
        return
    problem = template_problem(template, task)
    if problem is not None:
        raise UserMistake("TemplateMismatch", f"seed {task.name!r}: {problem}")


def served_warnings(
    dataset: Dataset, splits: Splits, verifier: Verifier, template: PromptTemplate | None
) -> list[str]:
    """What a user should hear before optimizing: each line says what happens and the fix."""
    warnings = []
    if not splits.holdout:
        warnings.append(
            "the holdout split is empty, so no lift can be measured on unseen seeds: name "
            'holdout seeds in --splits-file ({"train": [...], "holdout": [...]}), add a '
            "holdout.jsonl file to the dataset folder, or serve more rows"
        )
    names = {*splits.train, *splits.val, *splits.holdout}  # a set: datasets can be large
    served = [t for t in dataset.tasks if t.name in names]
    if verifier.needs_label:
        unlabelled = [t.name for t in served if t.expected is None]
        if unlabelled:
            warnings.append(
                f"{len(unlabelled)} of {len(served)} served seeds have no expected value "
                f"({_examples(unlabelled)}); their rollouts answer 422: "
                + missing_label_fix(verifier.name)
            )
    if template is not None:
        misfits = [(t.name, template_problem(template, t)) for t in served]
        bad = [(name, problem) for name, problem in misfits if problem is not None]
        if bad:
            warnings.append(
                f"{len(bad)} of {len(served)} served seeds cannot be rendered "
                f"({_examples([name for name, _ in bad])}); their rollouts answer 422: "
                f"seed {bad[0][0]!r}: {bad[0][1]}"
            )
    return warnings


def _examples(names: list[str]) -> str:
    shown = ", ".join(names[:EXAMPLES])
    return f"{shown}, ..." if len(names) > EXAMPLES else shown
