"""bench/scale.py's sections on container replicas and adaptive concurrency.

R1 throughput: rollouts/s through the real queue and client against 1, 2 and 4 replicas of a
   latency-bound container that takes 8 rollouts at once (capacity 8 each), behind Debian's
   HAProxy (the recipe of docs/replicas.md) and as a list of --container URLs. Target: 4 replicas >=
   3.6x one.
R2 a replica killed mid-run (kill -9, 3 replicas, behind HAProxy and as a URL list): rollouts
   lost, errored, and scores that differ from the container's rule (target: 0, 0, 0).
R3 a container with a hidden capacity C=4 (429 above, Retry-After 1 s, 200 ms a rollout) at
   --concurrency 32:
   goodput and 429 share of the adaptive limit once it has converged (targets: >= 0.9 x C /
   latency, < 5%), beside a fixed limit of 32 over the same span.

The containers are optimizer/testing/toy/capacity_container.py processes on 127.0.0.1; every figure
is measured on this machine by this run. Run alone: .venv/bin/python bench/scale_replicas.py
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.runtime.rollouts.limits import EndpointLimits  # noqa: E402
from optimizer.testing.replicas import (  # noqa: E402
    KillAt,
    QueueRun,
    Replica,
    haproxy,
    haproxy_binary,
    prompt,
    replicas,
    run_queue,
)
from optimizer.testing.toy.capacity_container import answer, load_program  # noqa: E402

CAPACITY, LATENCY, CONCURRENCY = 8, 0.5, 32
PER_REPLICA = 9  # candidates x 36 seeds per replica: ~20 s a point at capacity
PRESSURE_LATENCY = 0.2  # R3: 20 candidates x 36 seeds at C/L = 20/s, ~36 s a run


def _expected(candidates: int) -> dict[tuple[str, str], float]:
    program, labels = load_program()
    seeds = [*program["seeds"]["train"], *program["seeds"]["holdout"]]
    return {
        (f"c{i}", seed): answer(
            {"seed": seed, "candidate": {"system_prompt": prompt(i)}}, labels, 0
        )["reward"]
        for i in range(candidates)
        for seed in seeds
    }


def _modes() -> list[str]:
    """How the replicas are reached: through HAProxy (when installed) and as a URL list."""
    return ["haproxy", "urls"] if haproxy_binary() else ["urls"]


@contextlib.contextmanager
def _front(reps: list[Replica], mode: str, maxconn: int) -> Iterator[list[str]]:
    if mode == "haproxy":
        with haproxy([r.url for r in reps], maxconn=maxconn) as url:
            yield [url]
    else:
        yield [r.url for r in reps]


def _queue(urls: list[str], candidates: int, **kw: Any) -> QueueRun:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(
            run_queue(urls, Path(tmp) / "ws", concurrency=CONCURRENCY, candidates=candidates, **kw)
        )


def throughput() -> list[str]:
    """R1."""
    lines = [
        f"R1 throughput: replicas of capacity {CAPACITY}, latency {LATENCY * 1000:.0f} ms, "
        f"--concurrency {CONCURRENCY}; ideal = replicas x {CAPACITY / LATENCY:.0f}/s"
    ]
    modes = _modes()
    if len(modes) == 1:
        lines.append("   (haproxy not installed: apt-get install -y haproxy; URL lists only)")
    for mode in modes:
        rates = {}
        for n in (1, 2, 4):
            with (
                replicas(n, capacity=CAPACITY, latency=LATENCY) as reps,
                _front(reps, mode, CAPACITY) as urls,
            ):
                run = _queue(urls, PER_REPLICA * n)
                refused = sum(r.stats()["rejected"] for r in reps)
            rates[n] = run.paid / run.elapsed
            ideal = n * CAPACITY / LATENCY
            lines.append(
                f"   {mode:8} {n} replica{'s' if n > 1 else ' '}: {rates[n]:7.1f} rollouts/s "
                f"({rates[n] / ideal:4.0%} of ideal, {run.paid} rollouts, {run.errors} errors, "
                f"{refused} 429s)"
            )
        verdict = "PASS" if rates[4] >= 3.6 * rates[1] else "FAIL"
        lines.append(
            f"   {mode:8} 4 replicas / 1 = {rates[4] / rates[1]:.2f}x (target >= 3.60x) {verdict}"
        )
    return lines


def killed_replica() -> list[str]:
    """R2."""
    lines = ["R2 a replica killed (kill -9) mid-run: 3 replicas of capacity 4, latency 50 ms"]
    modes = _modes()
    candidates = 12
    expected = _expected(candidates)
    for mode in modes:
        with replicas(3, capacity=4, latency=0.05) as reps, _front(reps, mode, 4) as urls:
            kill = KillAt(reps[0], paid=150)
            run = _queue(urls, candidates, on_sample=kill)
        changed = sum(1 for key, reward in run.rewards.items() if reward != expected[key])
        lost = len(expected) - run.paid
        lines.append(
            f"   {mode:8} killed after {kill.at or '-'} of {len(expected)} "
            f"rollouts: {lost} lost, {run.errors} errored, {run.retries} retried, "
            f"{changed} scores changed"
            + ("  PASS" if kill.at and lost == run.errors == changed == 0 else "  FAIL")
        )
    return lines


def _pressure(adaptive: bool) -> tuple[QueueRun, list[Any], float | None, float]:
    limits = EndpointLimits(adaptive=adaptive)
    converged: list[float] = []

    def watch(seconds: float, paid: int, limit: int) -> None:
        if not converged and limit <= 5:
            converged.append(time.monotonic())

    with replicas(1, capacity=4, latency=PRESSURE_LATENCY, retry_after=1) as (container,):
        run = _queue([container.url], 20, limits=limits, on_sample=watch)
        ended = time.monotonic()
        timeline = container.stats(timeline=True)["timeline"]
    return run, timeline, converged[0] if converged else None, ended


def _window(timeline: list[Any], start: float, end: float) -> tuple[float, float, int]:
    inside = [status for t, status in timeline if start <= t < end]
    ok = inside.count(200)
    return ok / (end - start), (len(inside) - ok) / max(1, len(inside)), len(inside)


def hidden_capacity() -> list[str]:
    """R3."""
    capacity, latency = 4, PRESSURE_LATENCY
    target = 0.9 * capacity / latency
    lines = [
        f"R3 hidden capacity C={capacity} (429 above, Retry-After 1 s), latency "
        f"{latency * 1000:.0f} ms, --concurrency {CONCURRENCY}: goodput target >= "
        f"{target:.0f}/s (0.9 C/L), 429s < 5% once converged"
    ]
    adaptive, a_line, a_conv, a_end = _pressure(adaptive=True)
    fixed, f_line, _, f_end = _pressure(adaptive=False)
    a_start = a_line[0][0] if a_line else 0.0
    conv_after = (a_conv - a_start) if a_conv else None
    for name, run, line, end in (
        ("adaptive", adaptive, a_line, a_end),
        ("fixed", fixed, f_line, f_end),
    ):
        first = line[0][0]
        whole = _window(line, first, end - 1.0)
        steady = _window(line, first + (conv_after or 0.0), end - 1.0)
        lines.append(
            f"   {name:8} whole run: {whole[0]:5.1f}/s, {whole[1]:5.1%} 429s of {whole[2]} requests; "
            f"after {conv_after or 0:.1f} s: {steady[0]:5.1f}/s, {steady[1]:5.1%} 429s "
            f"({run.errors} errored, {run.paid} paid)"
        )
        if name == "adaptive":
            ok = steady[0] >= target and steady[1] < 0.05
            lines.append(
                f"   adaptive converged (limit <= {capacity + 1}) {conv_after:.1f} s after the first "
                f"request; steady goodput {steady[0] / (capacity / latency):.2f} x C/L  "
                + ("PASS" if ok else "FAIL")
                if conv_after is not None
                else "   adaptive never converged  FAIL"
            )
    return lines


SECTIONS = (throughput, killed_replica, hidden_capacity)


def main() -> None:
    for section in SECTIONS:
        for line in section():
            print(line, flush=True)


if __name__ == "__main__":
    main()
