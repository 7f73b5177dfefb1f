"""The local llama.cpp servers: threads, OpenMP's wait policy and server options, measured.

The main job serves the 0.5B student and the 1.5B reflection model as two llama.cpp
processes on the same cores. ggml's CPU backend runs its threads under GNU OpenMP, whose idle
threads spin unless ``OMP_WAIT_POLICY=PASSIVE``. Two parts, each printing its figures:

``servers`` (default): for each setting ``S[/R]:WAIT`` (S threads for the student server,
R for the reflection server, default R = S; WAIT = passive, active, default = the variable
unset (GNU OpenMP spins 300,000 rounds at a barrier before it sleeps), or spinN = unset with
GOMP_SPINCOUNT=N), both servers with the job's options, and

- student alone: a Banking77 classification (the baseline prompt with the 77 labels, a
  holdout query): the first call of that system prompt (``cold``, the whole prompt computed)
  and the median of the next ones (``warm``: llama.cpp reuses the common prefix);
- reflection alone: one call reading ~1.7k new tokens and writing 300 (a proposal; the end
  tokens are barred, so every setting writes as many);
- together: the same reflection call while the 40 holdout queries are classified back to
  back (4 in flight, as the queue sends them), as when the baseline's holdout runs in the
  background during the first reflection: the reflection's seconds, the student calls done
  meanwhile, the wall until both finish, and ``serial``, the two done one after the other
  (reflection alone + 40 x warm). Overlap pays where wall < serial.

``student``: one student server (2 threads, passive wait) per variant of llama_cpp.server
options (``--variants name=opt:value+opt:value,...``): cold, warm, ``alternating`` (two
system prompts in turn, the rollouts of two candidates interleaved: the prefix cache misses
on every call unless ``cache`` keeps both), and the server's peak resident memory; medians
of 3 cold, 8 warm and 10 alternating calls.

Every figure has the server's CPU seconds beside its wall seconds: other work on a shared
machine stretches the wall, much less the CPU a call needs.

``--rounds N`` repeats the list of settings or variants (A B A B), so drift from other work
on the machine shows; each block prints the load average it started under.

Run (needs ``gepa-runtime models install --student --reflection 1.5b``; starts and stops its
own servers on 127.0.0.1, one pair at a time):

    .venv/bin/python bench/llama_threads.py                        # servers, 4 settings
    .venv/bin/python bench/llama_threads.py servers --settings 2:passive,1/2:passive
    .venv/bin/python bench/llama_threads.py student
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.banking77.agent import system_message  # noqa: E402
from examples.banking77.data import load_examples, load_labels, stratified_sample  # noqa: E402
from examples.banking77.program import BASELINE  # noqa: E402
from optimizer.local_models import LlamaServer, ServedModels, model_path  # noqa: E402

LABELS = load_labels()
HOLDOUT = [
    e.text for e in stratified_sample(load_examples("test"), 40, LABELS, seed=0, split="holdout")
]
FAILURES = stratified_sample(load_examples("train"), 40, LABELS, seed=0, split="train")
# Qwen's end tokens (<|endoftext|>, <|im_end|>), barred from a proposal so that every setting
# writes the same number of tokens.
NO_END = {"151643": -100, "151645": -100}
PROMPT = system_message(BASELINE, LABELS)
OTHER_PROMPT = system_message(BASELINE + " Read the whole query before you answer.", LABELS)
WAITS = {"passive": "PASSIVE", "active": "ACTIVE", "default": None}


def wait_env(wait: str) -> dict[str, str | None]:
    """The server's OpenMP variables for ``passive``, ``active``, ``default`` or ``spinN``
    (the policy unset, GOMP_SPINCOUNT=N: spin N rounds at a barrier, then sleep)."""
    if wait.startswith("spin") and wait[4:].isdigit():
        return {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": wait[4:]}
    return {"OMP_WAIT_POLICY": WAITS[wait], "GOMP_SPINCOUNT": None}


DEFAULT_VARIANTS = (
    "default=,"
    "no-logits=logits_all:false,"
    "batch1024=logits_all:false+n_batch:1024+n_ubatch:1024,"
    "cache=logits_all:false+cache:true+cache_size:536870912"
)


def reflection_prompt() -> str:
    """A proposal request of ~1.6k tokens, new from its first token (a fresh nonce each)."""
    lines = [
        f"Request {uuid.uuid4().hex}. You improve the system prompt of a banking intent "
        "classifier. Its current text:",
        "<<<",
        BASELINE,
        ">>>",
        f"The allowed labels: {', '.join(LABELS)}.",
        "It got these queries wrong (query, its answer, the expected label):",
    ]
    wrong = LABELS[::-1]
    for i, example in enumerate(FAILURES):
        lines.append(f"- {example.text!r}: answered {wrong[i]}, expected {example.label}")
    lines.append(
        "Write the new system prompt: say how to tell the confused labels apart. "
        "Answer with the prompt only, about 200 words."
    )
    return "\n".join(lines)


@dataclass
class Call:
    """One chat completion: seconds, the server's CPU seconds meanwhile, token counts."""

    seconds: float
    cpu: float
    prompt_tokens: int
    completion_tokens: int


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far, all its threads (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def ask(
    client: httpx.AsyncClient,
    server: LlamaServer,
    messages: list[dict[str, str]],
    max_tokens: int,
    **extra: object,
) -> Call:
    """One chat completion at temperature 0 (``extra`` joins the body). Its CPU seconds are the
    server's during the call (the calls of others in flight on the same server included)."""
    body = {"model": server.alias, "messages": messages, "max_tokens": max_tokens, **extra}
    cpu, started = cpu_seconds(server.pid), time.monotonic()
    answer = await client.post(
        f"{server.base_url}/chat/completions", json={**body, "temperature": 0}, timeout=3600
    )
    answer.raise_for_status()
    usage = answer.json()["usage"]
    return Call(
        time.monotonic() - started,
        cpu_seconds(server.pid) - cpu,
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )


def classify(query: str, prompt: str = PROMPT) -> list[dict[str, str]]:
    """The messages of one Banking77 classification, as the example's agent sends them."""
    return [{"role": "system", "content": prompt}, {"role": "user", "content": query}]


def reflect() -> list[dict[str, str]]:
    """The messages of one proposal."""
    return [{"role": "user", "content": reflection_prompt()}]


# part 1: two servers


@dataclass(frozen=True)
class Setting:
    """Threads per server and the OpenMP wait policy (None: the variable unset)."""

    student_threads: int
    reflection_threads: int
    wait: str

    @classmethod
    def parse(cls, text: str) -> Setting:
        threads, _, wait = text.partition(":")
        student, _, reflection = threads.partition("/")
        known = wait in WAITS or (wait.startswith("spin") and wait[4:].isdigit())
        if not known or not student.isdigit() or not (reflection or "1").isdigit():
            raise SystemExit(f"--settings: {text!r} is not S[/R]:passive|active|default|spinN")
        return cls(int(student), int(reflection or student), wait)

    def __str__(self) -> str:
        threads = f"{self.student_threads}/{self.reflection_threads}"
        return f"threads {threads} wait {self.wait}"


def served(setting: Setting) -> ServedModels:
    """The student and the 1.5B reflection server for ``setting``."""
    env = wait_env(setting.wait)
    student = LlamaServer(
        model_path("student"), alias="student", n_threads=setting.student_threads, env=env
    )
    reflection = LlamaServer(
        model_path("reflection", reflection="1.5b"),
        alias="reflection",
        n_threads=setting.reflection_threads,
        env=env,
    )
    return ServedModels(student, reflection)


async def holdout_meanwhile(
    client: httpx.AsyncClient, student: LlamaServer, started: float
) -> list[float]:
    """Classify the 40 holdout queries, 4 in flight as the main job's queue sends them; the
    seconds since ``started`` at which each finished."""
    queue = list(HOLDOUT)
    finished: list[float] = []

    async def worker() -> None:
        while queue:
            await ask(client, student, classify(queue.pop(0)), 20)
            finished.append(time.monotonic() - started)

    await asyncio.gather(*(worker() for _ in range(4)))
    return finished


async def measure_servers(setting: Setting) -> str:
    """One block of figures for ``setting``."""
    load = f"{os.getloadavg()[0]:.2f}"
    with served(setting) as models:
        student, reflection = models.student, models.reflection
        assert reflection is not None
        async with httpx.AsyncClient() as client:
            await ask(client, reflection, [{"role": "user", "content": "hi"}], 4)
            cold = await ask(client, student, classify(HOLDOUT[0]), 20)
            warm = [await ask(client, student, classify(q), 20) for q in HOLDOUT[1:9]]
            alone = await ask(client, reflection, reflect(), 300, logit_bias=NO_END)
            cpu = cpu_seconds(student.pid) + cpu_seconds(reflection.pid)
            started = time.monotonic()
            writing = asyncio.create_task(
                ask(client, reflection, reflect(), 300, logit_bias=NO_END)
            )
            finished = await holdout_meanwhile(client, student, started)
            together = await writing
            wall = time.monotonic() - started
            cpu = cpu_seconds(student.pid) + cpu_seconds(reflection.pid) - cpu
    warm_s = statistics.median(c.seconds for c in warm)
    during = sum(1 for t in finished if t <= together.seconds)
    serial = alone.seconds + len(HOLDOUT) * warm_s
    return "\n".join(
        [
            f"{setting} (load average {load}):",
            f"  student alone: cold {cold.seconds:.2f} s ({cold.prompt_tokens} prompt tokens,"
            f" {cold.cpu:.2f} CPU s), warm {warm_s:.2f} s (median of {len(warm)},"
            f" {statistics.median(c.cpu for c in warm):.2f} CPU s)",
            f"  reflection alone: {alone.seconds:.1f} s ({alone.prompt_tokens} prompt +"
            f" {alone.completion_tokens} generated tokens, {alone.cpu:.1f} CPU s)",
            f"  together: reflection {together.seconds:.1f} s ({together.completion_tokens} "
            f"generated), {during}/{len(HOLDOUT)} student calls done meanwhile, all "
            f"{len(HOLDOUT)} in {max(finished):.1f} s; wall {wall:.1f} s ({cpu:.1f} CPU s) "
            f"against serial {serial:.1f} s ({wall / serial:.2f}x)",
        ]
    )


# part 2: student server options


@dataclass(frozen=True)
class Variant:
    """A name and the llama_cpp.server options it adds."""

    name: str
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse_all(cls, text: str) -> list[Variant]:
        out = []
        for part in (p for p in text.split(",") if p):
            name, _, opts = part.partition("=")
            pairs = [o.split(":", 1) for o in opts.split("+") if o]
            if not name or any(len(p) != 2 for p in pairs):
                raise SystemExit(f"--variants: {part!r} is not name=opt:value+opt:value")
            out.append(cls(name, dict((k, v) for k, v in pairs)))
        return out


def peak_rss_mb(pid: int | None) -> float:
    """The process's peak resident set (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def measure_student(variant: Variant) -> str:
    """One line of figures for a student server with ``variant``'s options."""
    load = f"{os.getloadavg()[0]:.2f}"
    server = LlamaServer(model_path("student"), alias="student", options=variant.options)
    with server:
        async with httpx.AsyncClient() as client:
            await ask(client, server, classify("hi", "hi"), 4)
            cold = [  # a new system prompt each time: nothing of it is cached
                await ask(client, server, classify(q, f"{i}. {PROMPT}"), 20)
                for i, q in enumerate(HOLDOUT[:3])
            ]
            await ask(client, server, classify(HOLDOUT[3]), 20)
            warm = [await ask(client, server, classify(q), 20) for q in HOLDOUT[4:12]]
            alternating = [
                await ask(client, server, classify(q, (OTHER_PROMPT, PROMPT)[i % 2]), 20)
                for i, q in enumerate(HOLDOUT[12:22])
            ]
            rss = peak_rss_mb(server.pid)
    return (
        f"{variant.name:<10} {' '.join(f'{k}={v}' for k, v in variant.options.items()) or '-'}:"
        f" cold {_median(cold)} ({cold[0].prompt_tokens} tokens), warm {_median(warm)},"
        f" alternating {_median(alternating)}, peak RSS {rss:.0f} MiB (load average {load})"
    )


def _median(calls: list[Call]) -> str:
    """Median seconds and median server CPU seconds of ``calls``."""
    wall = statistics.median(c.seconds for c in calls)
    return f"{wall:.2f} s / {statistics.median(c.cpu for c in calls):.2f} CPU s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", nargs="?", choices=("servers", "student"), default="servers")
    parser.add_argument(
        "--settings",
        default="2:passive,2:default,1:passive,1:default",
        help="servers: comma-separated S[/R]:passive|active|default|spinN",
    )
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="student: name=opt:v+opt:v")
    parser.add_argument("--rounds", type=int, default=1, help="run the list N times (A B A B)")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (1 min)", flush=True)
    if args.part == "servers":
        settings = [Setting.parse(s) for s in args.settings.split(",") if s]
        for setting in settings * args.rounds:
            print(asyncio.run(measure_servers(setting)), flush=True)
    else:
        for variant in Variant.parse_all(args.variants) * args.rounds:
            print(asyncio.run(measure_student(variant)), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
