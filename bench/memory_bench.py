"""Memory benchmark: peak RSS of the rollout queue when containers answer huge rollouts.

A container process (its memory is not counted) answers every ``POST /rollout`` with a
``--mib`` MiB body, streamed in 64 KiB chunks without a ``Content-Length`` (so the client
cannot refuse it from the header): a trace of chat messages with varied text, as an
agent's long tool loop produces (``--shape text``), or of tiny event objects
(``--shape events``, the worst case for Python's memory per JSON byte). The queue runs ``--rollouts`` rollouts at ``--concurrency`` into a real SQLite
workspace and the caller keeps every result (as the search keeps a candidate's train
results). Each scenario runs in a fresh Python process, so its peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``) is its own; the idle baseline (imports, no rollout)
is printed beside it.

Scenarios: the default response cap (16 MiB answers refused as errored rollouts, read no
further than the cap) and, with ``--cap-mib`` above the answer size, answers accepted, with
their traces shrunk to the workspace's trace cap. Target: peak < 300 MB at concurrency 8.

Why memory grew ~60x the response size before (tracemalloc on one 16 MiB body): the body
was read whole, decoded to a str, ``json.loads``-ed, validated into new containers, dumped
again by ``trace.model_dump`` and, in the committer, dumped to JSON, lowered for the secret
check and encoded, all at once for every rollout in flight; a trace of small JSON objects
costs ~7x its size per copy (16 MiB -> 115 MiB held per record). And every result the
search kept held its full trace, though only a <= 256 KiB compressed form was stored.
What changed is in :mod:`optimizer.runtime.rollouts.bodies`.

Run: .venv/bin/python bench/memory_bench.py [--mib 16] [--concurrency 8] [--rollouts 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MB = 300
_TEXT = (
    "the customer asked about a card payment that was declined twice and then refunded while "
    "the agent looked up the account balance called the tool returned an error retried and "
    "finally answered with the transfer status pending because the bank had not confirmed it"
)
_WORDS = _TEXT.split(" ")


def big_body(mib: float, shape: str = "text", seed: int = 0) -> bytes:
    """A scored rollout whose trace makes the JSON body about ``mib`` MiB."""
    rng = random.Random(seed)
    items: list[dict[str, object]] = []
    size, target = 0, int(mib * 1024 * 1024)
    while size < target:
        if shape == "events":
            item: dict[str, object] = {"t": "step", "i": len(items), "ms": rng.random()}
            size += 45
        else:
            text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(200, 1200)))
            role = rng.choice(("user", "assistant", "tool"))
            item = {"role": role, "content": f"{len(items)}: {text}"}
            size += len(text) + 40
        items.append(item)
    key = "events" if shape == "events" else "messages"
    body = {
        "reward": 1.0,
        "output": "ok",
        "feedback": "fine",
        "trace": {"messages": [], "tool_calls": [], "events": [], key: items},
        "usage": {"input_tokens": 1000, "output_tokens": 10, "cost_usd": 0.0, "latency_ms": 1.0},
    }
    return json.dumps(body).encode()


def serve(port: int, mib: float, shape: str) -> None:
    """The container process: one precomputed body for every rollout, streamed."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    body = big_body(mib, shape)
    chunk = 64 * 1024
    program = {
        "program_id": "big",
        "fingerprint": f"big-{mib}",
        "components": [{"name": "system_prompt", "text": "x"}],
        "seeds": {"train": [f"s{i}" for i in range(1000)], "holdout": ["h"]},
    }

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def get_program(request: Request) -> JSONResponse:
        return JSONResponse(program)

    async def rollout(request: Request) -> Response:
        await request.body()
        parts = (body[i : i + chunk] for i in range(0, len(body), chunk))
        return StreamingResponse(parts, media_type="application/json")

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/program", get_program),
            Route("/rollout", rollout, methods=["POST"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def container(mib: float, shape: str) -> Iterator[str]:
    """The container as a child process on 127.0.0.1; stopped by its pid on exit."""
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--mib", str(mib), "--shape", shape],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(url: str, rollouts: int, concurrency: int, cap_mib: float | None) -> dict:
    """Run the queue in this process; the result counts and the peak RSS (MB)."""
    from optimizer.runtime.accounts.budget import Budget
    from optimizer.runtime.accounts.events import EventSink
    from optimizer.runtime.rollouts.client import ContainerClient
    from optimizer.runtime.rollouts.queue import RolloutQueue
    from schemas import RunConfig
    from workspace import Workspace

    idle = _peak_mb()
    extra = {}
    if cap_mib is not None:
        if "max_response_bytes" not in inspect.signature(ContainerClient).parameters:
            raise SystemExit("this ContainerClient has no response cap (max_response_bytes)")
        extra["max_response_bytes"] = int(cap_mib * 1024 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        async with Workspace(Path(tmp) / "ws") as ws:
            run = await ws.create_run(RunConfig(containers=[url]))
            client = ContainerClient([url], **extra)
            await client.check_health()
            program = await client.program()
            budget = Budget()
            async with RolloutQueue(
                client=client,
                workspace=ws,
                run_id=run.run_id,
                program=program,
                budget=budget,
                events=EventSink(ws, run.run_id),
                concurrency=concurrency,
            ) as queue:
                start = time.perf_counter()
                per = max(1, rollouts // 4)
                kept = await asyncio.gather(
                    *(
                        queue.evaluate(
                            f"c{c}",
                            {"system_prompt": f"candidate {c}"},
                            [f"s{i}" for i in range(c, min(rollouts, c + per))],
                        )
                        for c in range(0, rollouts, per)
                    )
                )
                wall = time.perf_counter() - start
            await client.aclose()
    results = [r for part in kept for r in part.values()]
    ok = sum(1 for r in results if r.reward is not None)
    errors = [r.record.error for r in results if r.reward is None]
    return {
        "idle_mb": round(idle),
        "peak_mb": round(_peak_mb()),
        "ok": ok,
        "errors": len(errors),
        "first_error": (errors[0] or "")[:160] if errors else "",
        "wall_s": round(wall, 1),
    }


def child(args: argparse.Namespace) -> None:
    """One scenario in this (fresh) process; prints its result as JSON."""
    with container(args.mib, args.shape) as url:
        result = asyncio.run(measure(url, args.rollouts, args.concurrency, args.cap_mib))
    print(json.dumps(result))


def scenario(args: argparse.Namespace, cap_mib: float | None) -> dict:
    cmd = [
        sys.executable, __file__, "--child", "--mib", str(args.mib), "--shape", args.shape,
        "--rollouts", str(args.rollouts), "--concurrency", str(args.concurrency),
    ]  # fmt: skip
    if cap_mib is not None:
        cmd += ["--cap-mib", str(cap_mib)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=float, default=16.0, help="size of each answer")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--shape", choices=("text", "events"), default="text")
    parser.add_argument("--cap-mib", type=float, default=None, help="response cap (child only)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--scenarios",
        default="default,raised",
        help="default (the default cap), raised (cap above the answers)",
    )
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.mib, args.shape)
        return
    if args.child:
        child(args)
        return
    caps = {"default": None, "raised": args.mib * 2}
    print(
        f"{args.rollouts} rollouts of {args.mib:g} MiB ({args.shape} trace) "
        f"at concurrency {args.concurrency}"
    )
    print(f"{'scenario':<28} {'idle MB':>8} {'peak MB':>8} {'ok':>4} {'errors':>6} {'wall s':>7}")
    worst = 0
    for name in args.scenarios.split(","):
        cap = caps[name]
        result = scenario(args, cap)
        label = "default cap" if cap is None else f"cap {cap:g} MiB (accepted)"
        worst = max(worst, result["peak_mb"])
        print(
            f"{label:<28} {result['idle_mb']:>8} {result['peak_mb']:>8} {result['ok']:>4} "
            f"{result['errors']:>6} {result['wall_s']:>7}"
        )
        if result["first_error"]:
            print(f"    first error: {result['first_error']}")
    verdict = "met" if worst < TARGET_MB else "NOT met"
    print(f"worst peak {worst} MB: target < {TARGET_MB} MB {verdict}")


if __name__ == "__main__":
    main()
