"""The README's main job: a Banking77 GEPA optimization, end to end, in one command.

    bash examples/banking77/run.sh            # bootstraps .venv, then runs this module

Without ``OPENAI_API_KEY`` it installs (once) and starts the local Qwen2.5-Coder models
(0.5B student, 1.5B reflection by default), the Banking77 container and the optimizer service
with its live console, runs GEPA on the task of ``design.py`` (the 27 card intents, 54 train
and 297 holdout queries drawn by ``--seed``, 1,400 container calls, one rule per proposal;
docs/main-job.md), prints the promotion report and where the evidence packet is, and stops
every process it started. With ``OPENAI_API_KEY`` set it uses
hosted models instead (``GEPA_STUDENT_MODEL``, default gpt-4o-mini; ``GEPA_REFLECTION_MODEL``,
default gpt-4.1; ``OPENAI_BASE_URL`` for another OpenAI-compatible endpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from examples.banking77.data import GROUPS
from examples.banking77.design import DESIGN
from examples.processes import serving_process
from optimizer.local_models import free_port, install_models, serve_models

ROOT = Path(__file__).resolve().parents[2]
LOCAL_KEY = "sk-local-no-key-needed"


def _say(text: str) -> None:
    print(f"[banking77] {text}", flush=True)


@contextlib.contextmanager
def _models(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Hosted settings from the environment, or the local servers started here."""
    if os.environ.get("OPENAI_API_KEY"):
        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        _say(f"OPENAI_API_KEY is set: hosted models at {base}")
        yield {
            "student_url": base,
            "student_model": os.environ.get("GEPA_STUDENT_MODEL", "gpt-4o-mini"),
            "reflection_url": base,
            "reflection_model": os.environ.get("GEPA_REFLECTION_MODEL", "gpt-4.1"),
            "proposer_mode": "auto",
            "key": os.environ["OPENAI_API_KEY"],
            "extra": [],
        }
        return
    _say(f"no OPENAI_API_KEY: local models (student 0.5B, reflection {args.reflection})")
    _say("installing llama-cpp-python and the verified GGUF files (first time only: minutes)")
    install_models(student=True, reflection=args.reflection)
    # the student batches the rollouts the run sends at once (optimizer/local_models/batching.py)
    with serve_models(
        student_port=free_port(),
        reflection_port=free_port(),
        reflection=args.reflection,
        student_slots=DESIGN.concurrency,
    ) as served:
        assert served.reflection is not None
        _say(f"student on {served.student.base_url}, reflection on {served.reflection.base_url}")
        yield {
            "student_url": served.student.base_url,
            "student_model": "student",
            "reflection_url": served.reflection.base_url,
            "reflection_model": "reflection",
            # one rule per proposal: what the local 1.5B writes well (docs/main-job.md)
            "proposer_mode": DESIGN.proposer_mode,
            "key": LOCAL_KEY,
            # bounded reflections, a search that stops when idle: examples/banking77/design.py
            "extra": DESIGN.local_args(),
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the whole job; returns the exit code of the optimization."""
    # A plain ``kill`` of this process ends like Ctrl-C: the model servers, the container and
    # the console it started are stopped on the way out, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train-size", type=int, default=DESIGN.train_size)
    parser.add_argument("--holdout-size", type=int, default=DESIGN.holdout_size)
    parser.add_argument(
        "--intents",
        default=DESIGN.intents,
        help=f"the intents to keep: a group ({', '.join(GROUPS)}), comma-separated names, "
        f"or 'all' (default {DESIGN.intents})",
    )
    parser.add_argument(
        "--reflection", choices=("0.5b", "1.5b"), default="1.5b", help="local reflection model"
    )
    parser.add_argument("--auto", choices=("light", "medium", "heavy"), default=DESIGN.auto)
    parser.add_argument(
        "--max-metric-calls", type=int, default=DESIGN.max_metric_calls, help="overrides --auto"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="draws the splits and seeds the optimizer (default 0)"
    )
    parser.add_argument(
        "--method", choices=("gepa", "mipro"), default="gepa", help="optimizer (default gepa)"
    )
    parser.add_argument("--workspace", default=str(ROOT / ".gepa"))
    parser.add_argument(
        "--console-port", type=int, default=None, help="default: 8700 or a free port"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    gepa = [sys.executable, "-m", "optimizer.cli"]
    with _models(args) as models:
        env = {
            **os.environ,
            "OPENAI_API_KEY": models["key"],
            "OPENAI_BASE_URL": models["student_url"],
            "GEPA_STUDENT_MODEL": models["student_model"],
            # the service requires a token; `optimize run --server` reads the same variable
            "GEPA_SERVE_TOKEN": os.environ.get("GEPA_SERVE_TOKEN") or secrets.token_urlsafe(32),
        }
        container_port, console_port = free_port(), args.console_port or _port_or_free(8700)
        container = f"http://127.0.0.1:{container_port}"
        console = f"http://127.0.0.1:{console_port}"
        container_cmd = [
            sys.executable,
            "-m",
            "examples.banking77",
            "--port",
            str(container_port),
            "--train-size",
            str(args.train_size),
            "--holdout-size",
            str(args.holdout_size),
            "--intents",
            "" if args.intents == "all" else args.intents,
            "--seed",
            str(args.seed),
        ]
        serve_cmd = [
            *gepa,
            "serve",
            "--workspace",
            args.workspace,
            "--port",
            str(console_port),
            "--log-level",
            "warning",
        ]
        with (
            serving_process(container_cmd, env, f"{container}/health", "the Banking77 container"),
            serving_process(serve_cmd, env, f"{console}/api/health", "gepa-runtime serve"),
        ):
            _say(
                f"Banking77 container on {container} ({args.train_size} train / "
                f"{args.holdout_size} holdout queries; intents: {args.intents}; split seed {args.seed})"
            )
            _say(
                f"live console: {console}/?token={env['GEPA_SERVE_TOKEN']}  "
                "(open it in a browser while the run goes)"
            )
            budget = (
                ["--max-metric-calls", str(args.max_metric_calls)]
                if args.max_metric_calls
                else ["--auto", args.auto]
            )
            run_cmd = [
                *gepa,
                "optimize",
                "run",
                "--server",
                console,
                "--container",
                container,
                "--reflection-model",
                models["reflection_model"],
                "--reflection-base-url",
                models["reflection_url"],
                "--proposer-mode",
                models["proposer_mode"],
                *models["extra"],
                "--seed",
                str(args.seed),
                "--method",
                args.method,
                *budget,
            ]
            code = subprocess.run(run_cmd, cwd=ROOT, env=env).returncode
    minutes = (time.monotonic() - started) / 60
    if code == 0:
        _say(
            f"done in {minutes:.1f} min. Evidence: {_latest_run(args.workspace)}/ (evidence.json, report.md)"
        )
        _say(
            f"browse it again: gepa-runtime serve --workspace {args.workspace}, then open the URL it prints"
        )
    else:
        _say(
            f"the optimization failed (exit {code}) after {minutes:.1f} min; the messages above say why"
        )
    return code


def _latest_run(workspace: str) -> Path:
    """The folder of the newest evidence packet in ``workspace`` (the run this job made)."""
    packets = sorted(Path(workspace).glob("runs/*/evidence.json"), key=lambda p: p.stat().st_mtime)
    return packets[-1].parent if packets else Path(workspace) / "runs"


def _port_or_free(port: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return free_port()
    return port


if __name__ == "__main__":
    sys.exit(main())
