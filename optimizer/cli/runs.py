"""``gepa-runtime runs list | show RUN_ID | export RUN_ID [--output FILE]``: the runs of a workspace
(and ``branch``, ``compare`` and ``why``: :mod:`optimizer.cli.explore`).

``runs pause | resume | reject | pin | unpin | note | stop`` steer a run as it goes
(:mod:`optimizer.cli.steer`).

``export`` writes one JSON document: the run (config without secrets, status, budget, best),
its evidence packet (``null`` until it completes), its candidates and every trial. With
``--prompt-file PATH`` and/or ``--mlflow-prompt NAME`` it puts the best candidate where the
application loads its prompt instead (:mod:`optimizer.cli.export_prompt`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from optimizer.cli.explore import add_commands as add_explore_commands
from optimizer.cli.export_prompt import add_prompt_flags, export_prompt
from optimizer.cli.steer import add_commands as add_steering_commands
from optimizer.cli.workspace_flag import add_workspace_flag, open_workspace
from optimizer.runtime.lifecycle.branch import branches_of
from optimizer.runtime.results.report import promotion_summary
from optimizer.service import Digests, candidate_views, run_view, trial_views
from schemas import RunRecord, UserError
from workspace import Lease, Workspace

__all__ = ["EXPORT_FORMAT", "add_parser", "export_run"]

EXPORT_FORMAT = "gepa-runtime/run-export/1"
PAGE = 1000


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``runs`` and its subcommands."""
    parser = sub.add_parser(
        "runs", help="list, show, export and delete the runs of a workspace, and steer them"
    )
    commands = parser.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    listing = commands.add_parser("list", help="every run, newest first")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show = commands.add_parser("show", help="one run: status, budget, best, verdict")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    export = commands.add_parser("export", help="evidence packet + candidates + trials as one JSON")
    export.add_argument("run_id")
    export.add_argument("--output", "-o", default=None, help="write to FILE instead of stdout")
    export.add_argument(
        "--dspy",
        metavar="FILE.json",
        default=None,
        help="instead: write the best candidate of a DSPy container's run with DSPy's save "
        "(load it with program.load(FILE.json); needs the [dspy] extra)",
    )
    add_prompt_flags(export)
    delete = commands.add_parser("delete", help="delete a run that is not running, and its folder")
    delete.add_argument("run_id")
    for command, func in ((listing, _list), (show, _show), (export, _export), (delete, _delete)):
        add_workspace_flag(command)
        command.set_defaults(func=func)
    add_steering_commands(commands)
    add_explore_commands(commands)


def _open(args: argparse.Namespace) -> Workspace:
    """The workspace, opened read-only when this process may not write it (these commands only
    read; a writable one is opened as a writer so that an older schema is migrated)."""
    return open_workspace(args)


async def _view(ws: Workspace, digests: Digests, record: RunRecord) -> dict[str, Any]:
    return run_view(
        record,
        await digests.get(record.run_id),
        await ws.count_trials(record.run_id),
        active=False,
        branches=branches_of(await ws.list_runs(), record.run_id),
    )


async def _evidence(ws: Workspace, run_id: str) -> dict[str, Any] | None:
    if "evidence.json" not in await ws.list_files(run_id):
        return None
    return json.loads(await ws.read_file(run_id, "evidence.json"))  # type: ignore[no-any-return]


def _proposer(cfg: dict[str, Any]) -> str:
    """What writes the proposals: a reflection model or an external command."""
    if cfg.get("proposer_command"):
        return f"proposer command {cfg['proposer_command']}"
    return f"reflection {cfg.get('reflection_model')}"


def _score(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def _list(args: argparse.Namespace) -> int:
    async def views() -> list[dict[str, Any]]:
        async with _open(args) as ws:
            digests = Digests(ws)
            return [await _view(ws, digests, r) for r in await ws.list_runs()]

    runs = asyncio.run(views())
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print("no runs yet: create one with `gepa-runtime optimize create ...`")
        return 0
    rows = [("RUN ID", "STATUS", "PHASE", "PROGRAM", "PAID/LIMIT", "BEST", "CREATED")]
    for r in runs:
        b = r["budget"]
        rows.append(
            (
                r["run_id"],
                r["status"],
                r["phase"],
                r["program_id"] or "-",
                f"{b['paid']}/{b['limit'] or '-'}",
                _score((r["best"] or {}).get("mean")),
                time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"])),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _show(args: argparse.Namespace) -> int:
    async def gather() -> tuple[
        dict[str, Any], list[dict[str, Any]], dict[str, Any] | None, Path, Lease | None
    ]:
        async with _open(args) as ws:
            record = await ws.get_run(args.run_id)
            digests = Digests(ws)
            view = await _view(ws, digests, record)
            cands = candidate_views(
                await ws.list_candidates(record.run_id), await digests.get(record.run_id)
            )
            holder = await ws.lease_holder(record.run_id)
            packet = await _evidence(ws, record.run_id)
            # A Postgres store keeps the files: the folder printed below is made here.
            folder = await ws.checkout_files(record.run_id) if packet else ws.run_dir(record.run_id)
            return view, cands, packet, folder, holder

    view, cands, packet, folder, holder = asyncio.run(gather())
    if args.json:
        print(json.dumps({**view, "candidates_ranked": cands, "evidence": packet}, indent=2))
        return 0
    b, cfg = view["budget"], view["config"]
    print(
        f"run {view['run_id']}: {view['status']} (phase {view['phase']})"
        + (f", error: {view['error']}" if view["error"] else "")
    )
    print(f"  program:  {view['program_id'] or '(not reached yet)'}")
    print(
        f"  source:   {', '.join(cfg.get('containers') or []) or 'module ' + str(cfg.get('module'))}"
    )
    print(f"  models:   {_proposer(cfg)}, task {cfg.get('task_model') or '(container default)'}")
    print(
        f"  budget:   {b['paid']} paid / {b['limit'] or 'no limit'}, {b['cached']} cached, {b['errors']} errors, ${b['cost_usd']:.4f}"
    )
    print(
        f"  search:   {view['candidates']} candidates, {view['iterations']} iterations, {view['proposals_rejected']} proposals rejected"
    )
    if view["branch_of"]:
        origin = view["branch_of"]
        print(f"  branch:   branched from run {origin['run_id']} at {origin['candidate_id']}")
    if view["branches"]:
        named = ", ".join(f"{b['run_id']} (at {b['candidate_id']})" for b in view["branches"])
        print(f"  branches: {named}")
    best = view["best"] or {}
    print(f"  best:     {best.get('candidate_id', '-')} train {_score(best.get('mean'))}")
    for c in cands[:5]:
        parents = ", ".join(c["parents"]) or "-"
        print(
            f"    {c['candidate_id']}  {c['origin']:<8} train {_score(c['train_mean'])}  wins {c['seeds_won']:>3}  parents {parents}"
        )
    if packet is not None:
        print(promotion_summary(packet))
        print(f"evidence: {folder}/evidence.json and {folder}/report.md")
    elif holder is not None:
        print(f"being run by {holder.describe()}")
    elif view["status"] != "completed":
        print(f"resume or run it: gepa-runtime optimize run {view['run_id']}")
    return 0


async def export_run(ws: Workspace, run_id: str) -> dict[str, Any]:
    """The export document of one run."""
    record = await ws.get_run(run_id)
    digests = Digests(ws)
    trials: list[dict[str, Any]] = []
    while True:
        page = await ws.list_trials(run_id, offset=len(trials), limit=PAGE)
        trials += await trial_views(ws, page)
        if len(page) < PAGE:
            break
    return {
        "format": EXPORT_FORMAT,
        "exported_at": time.time(),
        "run": await _view(ws, digests, record),
        "evidence": await _evidence(ws, run_id),
        "candidates": candidate_views(await ws.list_candidates(run_id), await digests.get(run_id)),
        "trials": trials,
    }


def _export(args: argparse.Namespace) -> int:
    if args.dspy:
        return _export_dspy(args)
    if args.prompt_file or args.mlflow_prompt:
        return export_prompt(args, _open(args))

    async def build() -> dict[str, Any]:
        async with _open(args) as ws:
            return await export_run(ws, args.run_id)

    document = asyncio.run(build())
    text = json.dumps(document, indent=2, default=str)
    if args.output:
        _write_output(Path(args.output), text + "\n")
        print(
            f"wrote {args.output}: {len(document['candidates'])} candidates, {len(document['trials'])} trials, "
            f"evidence {'included' if document['evidence'] else 'not written yet'}",
            file=sys.stderr,
        )
    else:
        print(text)
    return 0


def _export_dspy(args: argparse.Namespace) -> int:
    """The best candidate of the run, saved as DSPy saves a program's state."""
    from container.dspy import save_components

    async def best() -> dict[str, Any] | None:
        async with _open(args) as ws:
            await ws.get_run(args.run_id)
            return await _evidence(ws, args.run_id)

    packet = asyncio.run(best())
    if packet is None:
        raise UserError(
            f"run {args.run_id} has no evidence yet: finish it first (optimize run {args.run_id})"
        )
    save_components(packet["best"]["components"], args.dspy)
    print(
        f"wrote {args.dspy}: candidate {packet['best']['candidate_id']} of run {args.run_id} "
        "(load it with program.load)",
        file=sys.stderr,
    )
    return 0


def _delete(args: argparse.Namespace) -> int:
    async def delete() -> dict[str, int]:
        async with _open(args) as ws:
            if (await ws.get_run(args.run_id)).status == "running":
                raise UserError(
                    f"run {args.run_id} has status running: stop the process that runs it, then "
                    f"delete it (if that process died, resume the run with `gepa-runtime optimize "
                    f"run {args.run_id}` and stop it)"
                )
            return await ws.delete_run(args.run_id)

    counts = asyncio.run(delete())
    print(
        f"deleted run {args.run_id} ({counts['trials']} trials, {counts['candidates']} candidates)"
    )
    return 0


def _write_output(path: Path, text: str) -> None:
    """Write ``--output``; a path that cannot be written is a ``UserError`` naming it."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UserError(
            f"cannot write --output {path}: {reason}; pass a file in an existing, writable "
            "folder (or leave --output out to print to stdout)"
        ) from exc
