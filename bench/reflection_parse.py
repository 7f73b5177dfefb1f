"""How many proposals a small local reflection model loses to parsing, by reason.

    .venv/bin/python bench/reflection_parse.py [--proposals 20] [--max-tokens 400] [--seed 0]

A real GEPA run (the runtime's queue, search and text-mode proposer) on the simulated 12-queue
router of the race (``bench/race_tasks.py``, additive task, no latency) with the local
Qwen2.5-Coder 0.5B as the reflection model on one llama.cpp server, ``--max-tokens`` output
tokens a call, one proposal in flight. It stops after ``--proposals`` proposals and prints
each proposal's outcome, then the counts by reason:

- parsed: the answer held a usable block (a new candidate, a text written before and gated
  again, or one the guards refused: unchanged, duplicate, too long);
- lost to parsing: ``cut_off`` (no complete block before max_tokens) or ``no_submission``
  (no block, or a block that only copies the request).

The issue's target: at most 1 in 5 lost to parsing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.local_models import LlamaServer, free_port, install_models, model_path  # noqa: E402
from optimizer.searches import run_optimization  # noqa: E402
from schemas import Event, RunConfig  # noqa: E402

LOST = {"cut_off", "no_submission"}


def _outcome(event: Event) -> str | None:
    """A proposal's outcome from one event (None: not a proposal's outcome)."""
    if event.type == "candidate" and event.data.get("mode") not in ("text-merge", None):
        return "new candidate"
    if event.type == "regate":
        return "written before, gated again"
    if event.type == "proposal_rejected":
        return str(event.data.get("reason", "error"))
    return None


async def _run(container: str, reflection: str, args: argparse.Namespace) -> list[str]:
    outcomes: list[str] = []
    done = asyncio.Event()

    def on_event(event: Event) -> None:
        outcome = _outcome(event)
        if outcome is None or done.is_set():
            return
        outcomes.append(outcome)
        print(f"  proposal {len(outcomes):2d}: {outcome}", flush=True)
        if len(outcomes) >= args.proposals:
            done.set()

    config = RunConfig(
        containers=[container],
        reflection_model="reflection",
        reflection_base_url=reflection,
        proposer_mode="text",
        reflection_max_tokens=args.max_tokens,
        max_prompt_chars=2500,
        proposals_in_flight=1,
        max_metric_calls=100_000,
        max_idle_iterations=1_000,
        patience=0,  # count proposals, however few improve the prompt
        use_merge=False,
        seed=args.seed,
    )
    with tempfile.TemporaryDirectory(prefix="reflection-parse-") as tmp:
        run = asyncio.create_task(run_optimization(config, workspace=tmp, on_event=on_event))
        waiter = asyncio.create_task(done.wait())
        await asyncio.wait({run, waiter}, return_when=asyncio.FIRST_COMPLETED)
        for task in (run, waiter):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if run.done() and not run.cancelled() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--proposals", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reflection", choices=("0.5b", "1.5b"), default="0.5b")
    args = parser.parse_args()
    install_models(student=False, reflection=args.reflection)
    server = LlamaServer(
        model_path("reflection", reflection=args.reflection),
        alias="reflection",
        port=free_port(),
        n_threads=2,
    )
    port = free_port()
    container = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "race_tasks.py"), "--task", "additive"]
        + ["--port", str(port), "--latency", "0"]
    )
    started = time.monotonic()
    try:
        server.spawn()
        server.wait_ready()
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        print(f"{args.reflection} reflection, {args.max_tokens} output tokens a call:")
        outcomes = asyncio.run(_run(url, server.base_url, args))
    finally:
        server.stop()
        container.terminate()
        container.wait(timeout=15)
    counts = Counter(outcomes)
    lost = sum(counts[r] for r in LOST)
    print(f"\n{len(outcomes)} proposals in {time.monotonic() - started:.0f} s; by reason:")
    for reason, n in counts.most_common():
        print(f"  {reason:<30} {n:3d}{'   (lost to parsing)' if reason in LOST else ''}")
    print(f"lost to parsing: {lost} of {len(outcomes)} ({lost / max(1, len(outcomes)):.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
