"""``runs export RUN_ID --prompt-file PATH | --mlflow-prompt NAME``: the winner where apps load it.

``--prompt-file`` writes the best candidate as a prompt file (its text for a one-component
program, or the JSON or YAML of its components: :mod:`schemas.prompt_file`), which the
container's ``@optimize(baseline=PATH)`` and the application read. ``--mlflow-prompt`` registers
it as a new version in MLflow's prompt registry, tagged with the lift and its interval; the
alias moves to it only when the run was promoted
(:mod:`optimizer.runtime.tracking.prompts`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import httpx

from optimizer.runtime.tracking import (
    DEFAULT_ALIAS,
    URI_ENVS,
    prompt_export,
    register_prompt,
    require_mlflow,
)
from schemas import GepaError, UserError
from schemas.prompt_file import write_prompt_file
from workspace import Workspace

__all__ = ["add_prompt_flags", "export_prompt"]

PROBE_TIMEOUT_S = 5.0


def add_prompt_flags(parser: argparse.ArgumentParser) -> None:
    """``--prompt-file``, ``--mlflow-prompt``, ``--alias`` and ``--mlflow`` of ``runs export``."""
    parser.add_argument(
        "--prompt-file",
        metavar="PATH",
        help="instead: write the best candidate where the app reads its prompt (its text for "
        ".txt/.md/.prompt; the JSON or YAML of its components for .json/.yaml)",
    )
    parser.add_argument(
        "--mlflow-prompt",
        metavar="NAME",
        help="instead: register the best's text as a new version of this prompt in MLflow's "
        "prompt registry, tagged with the lift and its interval (needs the [mlflow] extra)",
    )
    parser.add_argument(
        "--alias",
        default=DEFAULT_ALIAS,
        help=f"moved to that version when the run was promoted (default {DEFAULT_ALIAS})",
    )
    parser.add_argument(
        "--mlflow",
        metavar="URI",
        help="the MLflow tracking server (default: GEPA_MLFLOW_TRACKING_URI, MLFLOW_TRACKING_URI)",
    )


def export_prompt(args: argparse.Namespace, workspace: Workspace) -> int:
    """Write and/or register the best candidate of ``args.run_id``."""
    packet = asyncio.run(_packet(workspace, args.run_id))
    best = packet["best"]
    if args.prompt_file:
        path = write_prompt_file(args.prompt_file, best["components"])
        print(
            f"wrote {path}: candidate {best['candidate_id']} of run {args.run_id}",
            file=sys.stderr,
        )
    if args.mlflow_prompt:
        uri = _tracking_uri(args.mlflow)
        export = prompt_export(packet, args.mlflow_prompt, args.alias)
        number = _register(uri, export)
        alias = (
            f"; alias {export.alias} -> version {number}"
            if export.alias
            else f"; alias {args.alias} left as it was (the run was not promoted)"
        )
        print(
            f"registered prompts:/{export.name}/{number} on {uri}: candidate "
            f"{best['candidate_id']} of run {args.run_id}{alias}",
            file=sys.stderr,
        )
    return 0


async def _packet(workspace: Workspace, run_id: str) -> dict[str, Any]:
    async with workspace as ws:
        await ws.get_run(run_id)
        if "evidence.json" not in await ws.list_files(run_id):
            raise UserError(
                f"run {run_id} has no evidence yet, so no best: finish it first "
                f"(gepa-runtime optimize run {run_id})"
            )
        return json.loads(await ws.read_file(run_id, "evidence.json"))  # type: ignore[no-any-return]


def _tracking_uri(given: str | None) -> str:
    uri = given or next((os.environ[e] for e in URI_ENVS if os.environ.get(e)), None)
    if uri is None:
        raise UserError(
            "--mlflow-prompt registers on an MLflow tracking server: pass --mlflow URI "
            "(or set MLFLOW_TRACKING_URI)"
        )
    require_mlflow()
    if uri.startswith(("http://", "https://")):
        try:
            httpx.get(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError as exc:
            # MLflow's own client would retry a refused connection for minutes.
            raise UserError(
                f"the MLflow server at {uri} does not answer ({type(exc).__name__}: {exc}): "
                "start it or fix --mlflow"
            ) from exc
    return uri


def _register(uri: str, export: Any) -> int:
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        return register_prompt(MlflowClient(tracking_uri=uri), export)
    except MlflowException as exc:
        raise GepaError(f"the MLflow server at {uri} refused the prompt version: {exc}") from exc
