"""Writer process of the crash test: records rollouts forever, reporting each commit.

Usage: python crash_writer.py WORKSPACE TAG (a folder or a PostgreSQL URL). After each ``record_rollouts`` returns it
prints one line per record, ``<rollout_id> <status> <cache_key>``, and flushes: a
reported line is a promise that the rollout is durable. The test SIGKILLs this process.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from schemas import Policy, RolloutRecord, RunConfig, Trial, cache_key, content_hash
from workspace import Workspace

_VOCABULARY = "the card arrived late refund pending transfer failed exchange rate pin blocked"
WORDS = _VOCABULARY.split()


def _record(rng: random.Random, run_id: str, tag: str, i: int) -> RolloutRecord:
    components = {"system_prompt": f"prompt {i % 7}"}
    chash = content_hash(components)
    seed = f"{tag}-seed-{i}"
    status = "error" if rng.random() < 0.2 else "ok"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 400)))
    trace = {"messages": [{"role": "user", "content": text}], "pad": os.urandom(64).hex()}
    return RolloutRecord(
        cache_key=cache_key("fp", chash, seed, Policy()),
        run_id=run_id,
        candidate_id=chash[:16],
        candidate_hash=chash,
        fingerprint="fp",
        seed=seed,
        policy=Policy().model_dump_json(),
        status=status,
        reward=rng.random() if status == "ok" else None,
        feedback=text[:80],
        trace=trace,
        error=None if status == "ok" else "HTTP 503",
    )


async def main(root: str, tag: str) -> None:
    rng = random.Random(tag)
    async with Workspace(root) as ws:
        run_id = (await ws.create_run(RunConfig(), run_id=f"crash-{tag}")).run_id
        i = 0
        while True:
            batch = [_record(rng, run_id, tag, i + j) for j in range(rng.randint(1, 4))]
            i += len(batch)
            ids = await ws.record_rollouts(batch)
            lines = [f"{rid} {r.status} {r.cache_key}" for rid, r in zip(ids, batch, strict=True)]
            print("\n".join(lines), flush=True)
            trials = [
                Trial(run_id=run_id, candidate_id=r.candidate_id, seed=r.seed,
                      cache_key=r.cache_key, cached=False, status=r.status, rollout_id=rid)
                for rid, r in zip(ids, batch, strict=True)
            ]  # fmt: skip
            await ws.link_trials(run_id, trials)
            await ws.append_event(run_id, "rollouts", {"n": len(batch)})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
