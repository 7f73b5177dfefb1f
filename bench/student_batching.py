"""The student's two servers on the main job's calls: llama_cpp.server against the batching one.

    .venv/bin/python bench/student_batching.py                    # 96 classifications, 4 at once
    .venv/bin/python bench/student_batching.py --calls 48 --at-once 4 --rounds 2

Sends the same Banking77 card-intent classifications (the main job's labels and message
layout, two system prompts switching every 8 calls as two candidates' rollouts do) to each
server in turn, ``--at-once`` in flight, on 127.0.0.1, and prints per server: wall seconds,
seconds a call, and the batching server's own counts (forward passes, prompt tokens computed
and reused); then how many answers the two servers gave alike. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.banking77 import build_messages  # noqa: E402
from examples.banking77.data import GROUPS, load_examples  # noqa: E402
from optimizer.local_models import LlamaServer, install_models, model_path  # noqa: E402

PLAIN = "Classify the user's banking intent. Return the best matching label."
RULED = (
    PLAIN + " Rule: if the user mentions a card that has not arrived, answer card_arrival."
    " Rule: when in doubt about a charge, answer card_payment_fee_charged."
)


def conversations(count: int) -> list[list[dict[str, str]]]:
    """``count`` classifications, the system prompt switching every 8."""
    labels = GROUPS["cards"]
    queries = [e.text for e in load_examples("train") if e.label in labels][:count]
    return [
        build_messages(PLAIN if (i // 8) % 2 == 0 else RULED, labels, q)
        for i, q in enumerate(queries)
    ]


async def answer(
    base_url: str, calls: list[list[dict[str, str]]], at_once: int
) -> tuple[float, list[str]]:
    """Wall seconds for every call, ``at_once`` in flight, and the answers in order."""
    limit = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:

        async def one(messages: list[dict[str, str]]) -> str:
            async with limit:
                response = await client.post(
                    "/chat/completions",
                    json={"model": "student", "messages": messages, "temperature": 0,
                          "max_tokens": 20},
                )  # fmt: skip
                response.raise_for_status()
                return str(response.json()["choices"][0]["message"]["content"])

        started = time.perf_counter()
        answers = await asyncio.gather(*(one(m) for m in calls))
        return time.perf_counter() - started, list(answers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=96)
    parser.add_argument(
        "--at-once", type=int, default=4, help="calls in flight (the run's --concurrency)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeats of both servers, alternating"
    )
    args = parser.parse_args(argv)
    install_models(student=True, reflection=None)
    calls = conversations(args.calls)
    walls: dict[str, list[float]] = {"llama_cpp.server": [], "batching": []}
    answers: dict[str, list[str]] = {}
    for round_ in range(args.rounds):
        for name, slots in (("llama_cpp.server", 1), ("batching", args.at_once)):
            with LlamaServer(model_path("student"), alias="student", slots=slots) as server:
                asyncio.run(answer(server.base_url, calls[:1], 1))  # load, first prompt
                wall, said = asyncio.run(answer(server.base_url, calls, args.at_once))
                walls[name].append(wall)
                answers.setdefault(name, said)
                counts = ""
                if slots > 1:
                    health = httpx.get(server.base_url.removesuffix("/v1") + "/health").json()
                    counts = (
                        f"; {health['decodes']} forward passes for {health['requests']} requests, "
                        f"prompt tokens computed {health['prompt_computed']:,}, "
                        f"reused {health['prompt_reused']:,}"
                    )
            print(
                f"round {round_ + 1} {name:<17} {wall:7.2f} s, {wall / len(calls):.3f} s a call{counts}",
                flush=True,
            )
    stock, batched = (statistics.median(walls[n]) for n in ("llama_cpp.server", "batching"))
    same = sum(
        a == b for a, b in zip(answers["llama_cpp.server"], answers["batching"], strict=True)
    )
    print(
        f"\n{len(calls)} calls, {args.at_once} at once: llama_cpp.server {stock:.2f} s, batching "
        f"{batched:.2f} s (median of {args.rounds}): {stock / batched:.2f}x; "
        f"same answer on {same} of {len(calls)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
