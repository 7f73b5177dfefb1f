"""Two local llama.cpp servers computing at once: threads per server against the core count.

The main job serves the 0.5B student and the reflection model as two llama.cpp processes.
llama.cpp's threads spin while they wait, so two servers of ``--threads`` each that compute at
the same time on a machine with fewer cores than their threads slow each other down many
times over. This prints, for each thread count, a reflection call and a student call alone,
then a reflection call with six student calls sent meanwhile (what happens when the
baseline's holdout runs in the background during the first reflection).

Run: .venv/bin/python bench/llama_threads.py [--threads 2,1]   (needs `gepa-runtime models
install --student --reflection 1.5b`; starts and stops its own servers on 127.0.0.1)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.local_models import free_port, serve_models  # noqa: E402

REFLECT = "Write a 150-word system prompt for a bank support ticket router."
CLASSIFY = "Classify ticket {i}: my card was charged twice. Answer with one label."


async def _ask(
    client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int
) -> tuple[float, int]:
    """(seconds, completion tokens) of one chat completion at temperature 0."""
    started = time.monotonic()
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    answer = await client.post(f"{url}/chat/completions", json=body, timeout=1800)
    answer.raise_for_status()
    return time.monotonic() - started, int(answer.json()["usage"]["completion_tokens"])


async def measure(threads: int) -> str:
    """One line of figures for servers of ``threads`` threads each."""
    with serve_models(
        student_port=free_port(), reflection_port=free_port(), n_threads=threads
    ) as served:
        assert served.reflection is not None
        student, reflection = served.student.base_url, served.reflection.base_url
        async with httpx.AsyncClient() as client:
            await _ask(client, student, "student", "hi", 4)  # warm both up
            await _ask(client, reflection, "reflection", "hi", 4)
            alone_s = await _ask(client, student, "student", CLASSIFY.format(i=0), 24)
            alone_r = await _ask(client, reflection, "reflection", REFLECT, 200)
            started = time.monotonic()
            writing = asyncio.create_task(_ask(client, reflection, "reflection", REFLECT, 200))
            students = [
                await _ask(client, student, "student", CLASSIFY.format(i=i), 24)
                for i in range(1, 7)
            ]
            together_r = await writing
            wall = time.monotonic() - started
    return (
        f"threads {threads} each: alone: student {alone_s[0]:.2f} s, reflection "
        f"{alone_r[0]:.2f} s ({alone_r[1]} tokens) | together: reflection {together_r[0]:.2f} s "
        f"({together_r[1]} tokens), 6 student calls {sum(s for s, _ in students):.2f} s, "
        f"wall {wall:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="2,1", help="comma-separated threads per server")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores", flush=True)
    for threads in (int(t) for t in args.threads.split(",")):
        print(asyncio.run(measure(threads)), flush=True)


if __name__ == "__main__":
    main()
