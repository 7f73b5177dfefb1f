"""``optimize run --student-models a,b,c [--target-score X]``: one optimization per student model.

The runs happen here, one after the other (see :mod:`optimizer.sweep`); each model's run id
is printed as it starts, the comparison table at the end on stdout, with the folder holding
``comparison.json`` and ``comparison.md``. A service sweeps through ``POST /api/sweeps``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable

from optimizer.runtime.lifecycle.progress import ProgressBar
from optimizer.sweep import parse_models, render_table, run_sweep
from schemas import RunConfig, UserError

__all__ = ["add_sweep_flags", "sweep_command"]


def add_sweep_flags(parser: argparse.ArgumentParser) -> None:
    """``--student-models`` and ``--target-score`` on ``optimize run``."""
    parser.add_argument(
        "--student-models",
        default=os.environ.get("GEPA_STUDENT_MODELS"),
        metavar="A,B,C",
        help="one optimization per student model (sent to the container as policy.model), "
        "then a comparison; env GEPA_STUDENT_MODELS",
    )
    parser.add_argument(
        "--target-score",
        type=float,
        default=os.environ.get("GEPA_TARGET_SCORE"),  # type= parses
        metavar="X",
        help="with --student-models: name the cheapest model whose best holdout mean reaches X "
        "(env GEPA_TARGET_SCORE)",
    )


def sweep_command(
    args: argparse.Namespace, new_config: Callable[[argparse.Namespace], RunConfig]
) -> int:
    """Run the sweep the flags describe; prints the comparison table."""
    if args.run_id is not None:
        raise UserError("--student-models starts new runs: drop the run id")
    if getattr(args, "server", None):
        raise UserError("--student-models runs here; on a service, POST /api/sweeps instead")
    if args.target_score is not None and args.target_score != args.target_score:  # NaN
        raise UserError("--target-score must be a number")
    models = parse_models(args.student_models)
    config = new_config(args)
    bar = None if args.quiet else ProgressBar()

    def on_run(model: str, run_id: str) -> None:
        text = f"student model {model}: run {run_id}"
        if bar is not None:
            bar.note(text)
        else:
            print(text, file=sys.stderr)

    try:
        result = asyncio.run(
            run_sweep(
                config,
                models,
                workspace=args.workspace,
                target_score=args.target_score,
                on_event=bar,
                on_run=on_run,
            )
        )
    finally:
        if bar is not None:
            with contextlib.suppress(OSError):
                bar.close()
    print(render_table(result.comparison))
    print(f"comparison: {result.folder / 'comparison.md'} (and comparison.json)")
    return 0
