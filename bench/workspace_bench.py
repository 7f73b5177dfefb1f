"""Benchmark of the workspace's rollout cache: insert rate, lookup rate, bytes per rollout.

    .venv/bin/python bench/workspace_bench.py [--n 100000] [--batch 50] [--lookups 20000]

Rollouts carry realistic traces (a system prompt, a user message, an answer, a couple of
events: 1-2 KB of JSON built from a word list, so zlib compresses them as it would real
text). Insert time is the time spent in ``record_rollouts`` (one transaction per batch,
as the runtime commits each finished group); building the records is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from schemas import Policy, RolloutRecord, Usage, cache_key, content_hash
from workspace import Workspace

_VOCABULARY = (
    "the customer card payment transfer refund account balance pending declined arrived "
    "exchange rate fee top up verify identity pin blocked lost stolen cash withdrawal atm "
    "classify intent label answer with exactly one of the following categories when unsure "
    "prefer the most specific reason about delivery estimate virtual physical contactless"
)
WORDS = _VOCABULARY.split()
LABELS = [f"intent_{i}" for i in range(77)]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def make_rollout(
    rng: random.Random, i: int, prompts: list[str], error_rate: float
) -> RolloutRecord:
    """Rollout ``i`` of a run over ``prompts`` (candidates) with a realistic trace."""
    prompt = prompts[i % len(prompts)]
    chash = content_hash({"system_prompt": prompt})
    seed = f"b77-train-{i:06d}"
    status = "error" if rng.random() < error_rate else "ok"
    label = rng.choice(LABELS)
    trace = {
        "messages": [
            {"role": "system", "content": prompt},
            {"role": "user", "content": _text(rng, rng.randint(10, 40))},
            {"role": "assistant", "content": label},
        ],
        "tool_calls": [],
        "events": [
            {"type": "request", "model": "qwen2.5-coder-1.5b", "t_ms": rng.randint(50, 900)},
            {"type": "verify", "expected": rng.choice(LABELS), "got": label},
        ],
    }
    return RolloutRecord(
        cache_key=cache_key("fp-bench", chash, seed, Policy()),
        run_id="run-bench",
        candidate_id=chash[:16],
        candidate_hash=chash,
        fingerprint="fp-bench",
        seed=seed,
        policy=Policy().model_dump_json(),
        status=status,
        reward=float(rng.random() < 0.6) if status == "ok" else None,
        objectives={"reward": 1.0} if status == "ok" else {},
        output=label,
        feedback=f"predicted {label}, expected {rng.choice(LABELS)}",
        trace=trace,
        usage=Usage(input_tokens=rng.randint(200, 400), output_tokens=5, latency_ms=300.0),
        latency_ms=rng.uniform(100, 900),
        error=None if status == "ok" else "HTTP 503 after 5 attempts",
    )


async def bench(
    root: Path, n: int, batch: int, lookups: int, error_rate: float
) -> dict[str, float]:
    """Insert ``n`` rollouts, then time lookups; return the figures."""
    rng = random.Random(0)
    prompts = [_text(rng, rng.randint(90, 160)) for _ in range(40)]
    ok_keys: list[str] = []
    raw_trace_bytes = 0
    insert_s = 0.0
    async with Workspace(root) as ws:
        for start in range(0, n, batch):
            records = [
                make_rollout(rng, i, prompts, error_rate)
                for i in range(start, min(n, start + batch))
            ]
            raw_trace_bytes += sum(len(r.model_dump_json(include={"trace"})) - 10 for r in records)
            ok_keys += [r.cache_key for r in records if r.status == "ok"]
            began = time.perf_counter()
            await ws.record_rollouts(records)
            insert_s += time.perf_counter() - began

        sample = rng.sample(ok_keys, min(lookups, len(ok_keys)))
        began = time.perf_counter()
        for key in sample:
            if await ws.lookup(key) is None:
                raise SystemExit(f"cache miss on a stored key {key}")
        hit_s = time.perf_counter() - began

        misses = [cache_key("fp-other", "h", f"s{i}", Policy()) for i in range(len(sample))]
        began = time.perf_counter()
        for key in misses:
            if await ws.lookup(key) is not None:
                raise SystemExit("hit on a key never stored")
        miss_s = time.perf_counter() - began

        began = time.perf_counter()
        found = 0
        for start in range(0, len(sample), 100):
            found += len(await ws.lookup_many(sample[start : start + 100]))
        many_s = time.perf_counter() - began
        if found != len(sample):
            raise SystemExit("lookup_many lost keys")
    size = sum(p.stat().st_size for p in root.iterdir() if p.name.startswith("workspace.sqlite"))
    return {
        "rollouts": n,
        "insert_per_s": n / insert_s,
        "lookup_hit_per_s": len(sample) / hit_s,
        "lookup_miss_per_s": len(misses) / miss_s,
        "lookup_many_hit_per_s": len(sample) / many_s,
        "file_bytes": size,
        "bytes_per_rollout": size / n,
        "raw_trace_bytes_avg": raw_trace_bytes / n,
    }


def main() -> None:
    """Parse arguments, run the benchmark in a temporary folder, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="rollouts to insert")
    parser.add_argument("--batch", type=int, default=50, help="rollouts per transaction")
    parser.add_argument("--lookups", type=int, default=20_000, help="lookups of each kind")
    parser.add_argument("--error-rate", type=float, default=0.02, help="share of error rows")
    parser.add_argument("--dir", type=Path, default=None, help="keep the workspace here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gepa-ws-bench-") as tmp:
        root = args.dir or Path(tmp) / "ws"
        figures = asyncio.run(bench(root, args.n, args.batch, args.lookups, args.error_rate))
    print(f"rollouts inserted      {figures['rollouts']:>12,}  (batch {args.batch}/transaction)")
    print(f"insert rate            {figures['insert_per_s']:>12,.0f}  rollouts/s")
    print(f"lookup rate, hits      {figures['lookup_hit_per_s']:>12,.0f}  lookups/s (one key each)")
    print(
        f"lookup rate, misses    {figures['lookup_miss_per_s']:>12,.0f}  lookups/s (one key each)"
    )
    print(
        f"lookup_many, hits      {figures['lookup_many_hit_per_s']:>12,.0f}  keys/s (100 keys/call)"
    )
    print(f"raw trace JSON         {figures['raw_trace_bytes_avg']:>12,.0f}  bytes/rollout (avg)")
    print(f"database file          {figures['file_bytes']:>12,}  bytes")
    print(f"bytes per rollout      {figures['bytes_per_rollout']:>12,.0f}  (file size / rows)")


if __name__ == "__main__":
    main()
