"""``gepa-runtime optimize create | dry-run | run``: create, check and run optimizations.

``plan`` predicts what a run will spend from a few samples (:mod:`optimizer.cli.plan`);
``create`` checks a run as ``dry-run`` does (:mod:`optimizer.checks.create_check`), copies its
dataset, splits and verifier files into the workspace
(:mod:`optimizer.runtime.lifecycle.run_inputs`), stores it and prints the commands that check and
run it; ``dry-run`` checks everything before any budget is spent (a few baseline rollouts, no
reflection call, nothing stored); ``run`` runs a stored run (or resumes it) by id, or does
everything in one shot without one. ``--module`` serves the target in-process
(:mod:`optimizer.runtime.lifecycle.embedded`); ``--server URL`` hands the run to a
``gepa-runtime serve`` and follows its events instead of running here.

A local run ends cleanly on Ctrl-C, SIGTERM and SIGHUP: it is recorded as ``cancelled`` and
the command that resumes it is printed. Warnings of the run (a large ``--auto`` budget, a
changed program, a lease taken over) are printed on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from optimizer.checks.sample_rollouts import SAMPLE_ROLLOUTS
from optimizer.cli.flags import (
    add_config_flags,
    config_from_args,
    config_overrides,
)
from optimizer.cli.plan import add_plan_parser
from optimizer.cli.sweep import add_sweep_flags, sweep_command
from optimizer.cli.workspace_flag import add_workspace_flag
from optimizer.mipro import load_optuna
from optimizer.runtime.accounts.events import Listener
from optimizer.runtime.lifecycle.progress import ProgressBar
from optimizer.runtime.lifecycle.run import RunResult
from optimizer.runtime.lifecycle.run_config import new_config, stored_config
from optimizer.runtime.lifecycle.run_inputs import create_with_inputs, resolve_inputs
from optimizer.runtime.results.report import promotion_summary
from optimizer.runtime.tracking import require_mlflow, require_prompt_registry
from optimizer.searches import run_stored
from optimizer.service.remote import ServiceClient
from proposer.external import check_proposer_command
from schemas import Event, GepaError, RolloutRecord, RunConfig, UserError
from schemas.env import read_env
from workspace import DatabaseURL, Workspace, resolve_workspace

__all__ = ["add_parser", "check_runnable"]

T = TypeVar("T")

OFFLINE_HINT = (
    "offline, start the local models with `gepa-runtime models serve` and pass "
    "--reflection-base-url http://127.0.0.1:8013/v1 --reflection-model reflection"
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``optimize`` and its ``create``, ``dry-run``, ``plan`` and ``run`` subcommands."""
    parser = sub.add_parser("optimize", help="create, check and run optimizations")
    commands = parser.add_subparsers(dest="optimize_command", metavar="SUBCOMMAND", required=True)
    create = commands.add_parser(
        "create",
        help="check a run as dry-run does, copy its input files into the workspace and store it; "
        "print the commands that check and run it",
    )
    create.add_argument("--run-id", default=None, help="id of the new run (default: run-<10 hex>)")
    create.add_argument(
        "--no-check",
        action="store_true",
        help="store the run without dry-run's checks (e.g. its container is not up yet)",
    )
    dry = commands.add_parser(
        "dry-run", help="check a run (or the flags) before any budget is spent"
    )
    dry.add_argument(
        "run_id", nargs="?", default=None, help="the stored run to check (default: the flags)"
    )
    for command in (create, dry):
        command.add_argument(
            "--sample-rollouts",
            type=int,
            default=os.environ.get("GEPA_SAMPLE_ROLLOUTS", str(SAMPLE_ROLLOUTS)),  # type= parses
            metavar="N",
            help="baseline rollouts sent on train seeds to catch rows or targets that fail every "
            f"rollout; not stored (default {SAMPLE_ROLLOUTS}, 0: none; env GEPA_SAMPLE_ROLLOUTS)",
        )
    run = commands.add_parser("run", help="run an optimization (one shot), or run/resume RUN_ID")
    run.add_argument("run_id", nargs="?", default=None, help="run or resume this run")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    add_sweep_flags(run)
    add_plan_parser(commands, _new_config)
    for command, func in ((create, _create), (dry, _dry_run), (run, _run)):
        add_workspace_flag(command)
        add_config_flags(command)
        if command is not dry:
            command.add_argument(
                "--server",
                metavar="URL",
                help="send the run to this `gepa-runtime serve` (env GEPA_SERVER)",
            )
            command.add_argument(
                "--server-token", help="the service's bearer token (env GEPA_SERVE_TOKEN)"
            )
        command.set_defaults(func=func)


def check_runnable(config: RunConfig) -> None:
    """Errors a run would hit at once, reported before anything starts."""
    if not config.containers and not config.module:
        raise UserError(
            "no task container: pass --container URL (repeatable) or --module MODULE --dataset PATH"
        )
    if not config.reflection_model and not config.proposer_command:
        raise UserError(
            f"no reflection model: pass --reflection-model MODEL (env GEPA_REFLECTION_MODEL); {OFFLINE_HINT}"
        )
    check_proposer_command(config)
    if config.method == "mipro":
        load_optuna()
    if config.mlflow_tracking_uri:
        require_mlflow()
    if config.mlflow_prompt:
        require_prompt_registry(config)


def _new_config(args: argparse.Namespace) -> RunConfig:
    """The config of a new run from flags and env: budget defaulted, paths pinned, checked
    (:func:`optimizer.runtime.lifecycle.run_config.new_config`)."""
    config = config_from_args(args)
    if not config.budget_given():
        print("no budget given: using --auto light (the formula: docs/budget.md)", file=sys.stderr)
    config = new_config(config)
    check_runnable(config)
    return config


def _print_result(result: RunResult) -> None:
    print(promotion_summary(result.evidence))
    print(f"run id:   {result.run_id}")
    print(f"evidence: {result.evidence_dir}/evidence.json and {result.evidence_dir}/report.md")


def _where(args: argparse.Namespace, root: Path | DatabaseURL) -> str:
    if args.server:
        return f"--server {shlex.quote(args.server)}" + (
            ' --server-token "$GEPA_SERVE_TOKEN"' if args.server_token else ""
        )
    return f"--workspace {shlex.quote(str(root))}"


def _server_from_env(args: argparse.Namespace) -> None:
    """``--server`` and ``--server-token`` from the environment (or the docs' names)."""
    args.server = args.server or read_env("GEPA_SERVER")
    args.server_token = args.server_token or read_env("GEPA_SERVE_TOKEN")


def _create(args: argparse.Namespace) -> int:
    # the checks (and the container SDK they load) only for the commands that use them
    from optimizer.checks.create_check import check_before_create, planned_run_id

    _server_from_env(args)
    config = _new_config(args)
    # A local run's check sends its samples as the run will and keeps them for it.
    planned = None if args.server else planned_run_id(args.run_id)
    samples: list[RolloutRecord] = []
    if not args.no_check:
        checked = check_before_create(config, max(args.sample_rollouts, 0), planned)
        if checked is None:
            return 1
        samples = checked
    root = resolve_workspace(args.workspace)
    if args.server:
        run_id = asyncio.run(_remote_create(args, config))["run_id"]
        place = f"on {args.server} (console: {args.server.rstrip('/')}/runs/{run_id})"
    else:
        imports = not args.no_check
        run_id = asyncio.run(_local_create(root, config, planned, imports=imports, samples=samples))
        place = f"in workspace {root}"
    where = _where(args, root)
    token = ' --token "$GEPA_CONTAINER_TOKEN"' if args.token and not args.server else ""
    print(run_id)
    print(f"created run {run_id} {place} (not started)")
    if not args.server:
        print(f"  check it: gepa-runtime optimize dry-run {run_id} {where}{token}")
    print(f"  run it:   gepa-runtime optimize run {run_id} {where}{token}")
    if token:
        print(
            "  (the container token is never stored: pass it again with --token or GEPA_CONTAINER_TOKEN)"
        )
    return 0


async def _local_create(
    root: Path | DatabaseURL,
    config: RunConfig,
    run_id: str | None,
    *,
    imports: bool,
    samples: list[RolloutRecord],
) -> str:
    from optimizer.checks.create_check import store_samples

    async with Workspace(root) as ws:
        record = await create_with_inputs(ws, config, run_id, target_defaults=imports)
        await store_samples(ws, config, samples)
        return record.run_id


async def _remote_create(args: argparse.Namespace, config: RunConfig) -> dict[str, object]:
    client = ServiceClient(args.server, token=args.server_token)
    try:
        return await client.create(config, run_id=args.run_id)
    finally:
        await client.aclose()


def _dry_run(args: argparse.Namespace) -> int:
    from optimizer.checks.preflight import preflight, render_findings

    async def check() -> tuple[str, RunConfig]:
        if args.run_id is None:
            return "the flags", _new_config(args)
        async with Workspace(resolve_workspace(args.workspace)) as ws:
            record = await ws.get_run(args.run_id)
            await ws.checkout_files(args.run_id)  # a Postgres store's input copies, here
        stored = resolve_inputs(stored_config(record), ws.root)
        given = config_overrides(args)
        update = {k: v for k, v in given.items() if k in ("containers", "container_token")}
        if update.get("containers"):  # checking the run against other containers than its module
            update.update(dict.fromkeys(("module", "target", "dataset", "verifier", "splits_file")))
        return f"run {args.run_id}", RunConfig.model_validate({**stored.model_dump(), **update})

    what, config = asyncio.run(check())
    samples = max(args.sample_rollouts, 0)
    sent = f"{samples} baseline rollout(s), not stored" if samples else "no rollout"
    print(f"dry-run of {what} ({sent}; the reflection model is not called)")
    findings = asyncio.run(preflight(config, sample_rollouts=samples))
    print(render_findings(findings))
    return 0 if all(f.ok for f in findings) else 1


def _run(args: argparse.Namespace) -> int:
    _server_from_env(args)
    if args.student_models:
        return sweep_command(args, _new_config)
    if args.server:
        return asyncio.run(_run_remote(args))
    root = resolve_workspace(args.workspace)
    bar = None if args.quiet else ProgressBar()
    run_ids: list[str] = []  # the run's id once it exists, for the resume hint
    stopped: BaseException | None = None
    try:
        result = _until_signal(_run_local(args, root, _console(bar), run_ids))
    except (KeyboardInterrupt, _Terminated) as exc:
        stopped = exc
    finally:
        if bar is not None:
            with contextlib.suppress(OSError):  # a terminal closed by SIGHUP
                bar.close()
    if stopped is not None:
        return _interrupted(args, root, run_ids, stopped)
    _print_result(result)
    return 0


class _Terminated(Exception):
    """The process got SIGTERM or SIGHUP; the run was cancelled as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _until_signal(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, with SIGTERM and SIGHUP handled like Ctrl-C.

    Their default action kills the process at once and leaves the run ``running`` forever;
    here they cancel the main task instead, so the run records itself ``cancelled`` (and
    gives up its lease) before ``_Terminated`` ends the command.
    """

    async def main() -> T:
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None
        got: list[int] = []

        def stop(signum: int) -> None:
            got.append(signum)
            task.cancel()

        handled = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s]
        for signum in handled:
            with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
                loop.add_signal_handler(signum, stop, signum)
        try:
            return await coro
        except asyncio.CancelledError:
            if got:
                raise _Terminated(got[0]) from None
            raise
        finally:
            for signum in handled:
                with contextlib.suppress(NotImplementedError):
                    loop.remove_signal_handler(signum)

    return asyncio.run(main())


def _interrupted(
    args: argparse.Namespace, root: Path | DatabaseURL, run_ids: list[str], exc: BaseException
) -> int:
    """Say how the run ended and how to resume it; the exit code of the signal."""
    what, code = (str(exc), 128 + exc.signum) if isinstance(exc, _Terminated) else ("Ctrl-C", 130)
    with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) takes stderr with it
        if not run_ids:
            print(f"interrupted ({what}) before the run was created", file=sys.stderr)
            return code
        token = ' --token "$GEPA_CONTAINER_TOKEN"' if args.token else ""
        print(
            f"run {run_ids[0]} cancelled ({what}); resume it with:\n"
            f"  gepa-runtime optimize run {run_ids[0]} {_where(args, root)}{token}",
            file=sys.stderr,
        )
    return code


def _console(bar: ProgressBar | None) -> Listener:
    """The listener of a run in this terminal: the progress line, warnings, an --auto budget,
    a person's actions as the run takes them in."""

    def note(text: str) -> None:
        if bar is not None:
            bar.note(text)
        else:
            print(text, file=sys.stderr)

    def on_event(event: Event) -> None:
        if event.type == "warning":
            note(f"warning: {event.data.get('message')}")
        elif event.type == "action_applied":
            data = event.data
            about = f" {data['candidate_id']}" if data.get("candidate_id") else ""
            note(f"steered: {data.get('action')}{about} (from the {data.get('source')})")
        elif event.type == "program" and (event.data.get("budget") or {}).get("auto"):
            budget = event.data["budget"]
            note(
                f"budget: {budget['max_metric_calls']:,} metric calls from --auto "
                f"{budget['auto']} (cap it with --max-metric-calls N)"
            )
        if bar is not None:
            bar(event)

    return on_event


def _serving(url: str) -> None:
    print(f"serving the --module target in-process on {url}", file=sys.stderr)


async def _run_local(
    args: argparse.Namespace, root: Path | DatabaseURL, listener: Listener, run_ids: list[str]
) -> RunResult:
    async with Workspace(root) as ws:
        if args.run_id is None:
            config = _new_config(args)
            record = await create_with_inputs(ws, config)
            run_ids.append(record.run_id)
            return await run_stored(
                ws, record.run_id, secrets=config, on_event=listener, on_serving=_serving
            )
        run_ids.append(args.run_id)
        overrides = config_from_args(args) if config_overrides(args) else None
        return await run_stored(
            ws, args.run_id, secrets=overrides, on_event=listener, on_serving=_serving
        )


async def _run_remote(args: argparse.Namespace) -> int:
    client = ServiceClient(args.server, token=args.server_token)
    try:
        if args.run_id is None:
            view = await client.create(_new_config(args), start=True)
        else:
            view = await client.run(args.run_id)
            if view["status"] != "completed" and not view["active"]:
                view = await client.start(args.run_id)
        run_id = str(view["run_id"])
        page = _console_url(client.base_url, run_id, args.server_token)
        print(f"run {run_id} on {client.base_url}; console: {page}", file=sys.stderr)
        bar = None if args.quiet else ProgressBar()
        try:
            end = await client.follow(run_id, _console(bar))
        finally:
            if bar is not None:
                bar.close()
        if end.get("status") != "completed":
            raise GepaError(
                f"run {run_id} ended {end.get('status')}: {end.get('error') or 'no error recorded'}; "
                f"resume it with `gepa-runtime optimize run {run_id} --server {client.base_url}`"
            )
        packet = await client.evidence(run_id)
    finally:
        await client.aclose()
    print(promotion_summary(packet))
    print(f"run id:   {run_id}")
    print(f"console:  {page}")
    return 0


def _console_url(base_url: str, run_id: str, token: str | None) -> str:
    """The run's console page; with the service token in it, as the page needs it to open."""
    page = f"{base_url}/runs/{run_id}"
    return f"{page}?{urlencode({'token': token})}" if token else page
