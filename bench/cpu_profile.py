"""Where the optimizer process spends its CPU on one race run (``ours-1`` of ``bench/race.py``).

    .venv/bin/python bench/cpu_profile.py                        # additive, seed 0, as the race
    .venv/bin/python bench/cpu_profile.py --time-scale 0.25 --top 40

Prints, for the code on ``sys.path`` (the checkout, or ``PYTHONPATH=<another tree>``):

1. import CPU: ``python -c "import optimizer.cli.main"`` and ``gepa-runtime --help``, the
   median of ``--repeat`` runs, each process's user + system seconds from ``os.wait4``;
2. the run's CPU: ``gepa-runtime optimize run`` exactly as the race's ``ours-1`` runs it
   against the same simulated container and reflection model (``bench/race_tasks.py``,
   ``bench/race_reflector.py``), measured the same way, with its peak RSS;
3. the same run again under cProfile (a profiler per thread, each timing its own thread's
   CPU): CPU spent importing, the CPU of the other threads (aiosqlite's, ``to_thread``), own
   CPU by package, and the top functions by own CPU. The profiler slows the run down (about
   2-3x on this code); compare shares, not these seconds, with the unprofiled total.

``--http`` measures the container client's transport alone instead: CPU per ``POST
/rollout`` against ``bench/noop_container.py`` (a real uvicorn server in its own process),
``--http-n`` requests by ``--http-concurrency`` workers over the same httpx client, through
httpx's own transport (httpcore, one pool per worker, as before), through
``transport.http11.PlainHTTPTransport`` by the client's ``send``, and straight to that
transport, past httpx's client layers (cookies, auth, redirects): how the container client
sends its rollouts now.

Our packages are byte-compiled first (``compileall``, as ``pip install`` does for a wheel):
with ``PYTHONDONTWRITEBYTECODE`` set, as on some machines, a checkout's modules are otherwise
compiled from source by every process, about 0.1-0.15 s of CPU that no installed copy pays;
``--no-compile`` leaves them as they are.

CPU seconds vary less with the machine's load than wall seconds do, but they still do (a
busy machine's caches are colder): the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

PYTHON = str(ROOT / ".venv" / "bin" / "python")


def _cpu(cmd: Sequence[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(
        list(cmd), env=env, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir()
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed")
    return usage.ru_utime + usage.ru_stime


def import_figures(repeat: int) -> dict[str, float]:
    """Median CPU seconds of importing the CLI and of ``gepa-runtime --help``."""
    env = dict(os.environ)
    probes = {
        "import optimizer.cli.main": [PYTHON, "-c", "import optimizer.cli.main"],
        "gepa-runtime --help": [PYTHON, "-m", "optimizer.cli", "--help"],
        "python -c pass": [PYTHON, "-c", "pass"],
    }
    return {
        name: statistics.median(_cpu(cmd, env) for _ in range(repeat))
        for name, cmd in probes.items()
    }


def ours_args(arena: Any, in_flight: int, workspace: Path) -> list[str]:
    """``optimize run`` as ``race.run_ours`` builds it (kept in step with that function)."""
    return [
        "optimize", "run", "--quiet", "--workspace", str(workspace),
        "--container", arena.container,
        "--reflection-model", arena.reflection_model,
        "--reflection-base-url", arena.reflection,
        "--proposer-mode", "text",
        "--reflection-max-tokens", str(arena.reflection_max_tokens),
        "--concurrency", str(arena.concurrency),
        "--proposals-in-flight", str(in_flight),
        "--seed", str(arena.seed),
        "--max-metric-calls", str(arena.gepa_budget + 2 * arena.holdout),
        "--method", "gepa",
        *arena.ours_extra,
    ]  # fmt: skip


# the transport alone


def _rollout_body(i: int) -> bytes:
    return json.dumps(
        {"candidate": {"system_prompt": "Route the ticket. " * 20}, "seed": f"s{i}", "run_id": "r"}
    ).encode()


async def _post_all(http: Any, url: str, n: int, concurrency: int, straight: Any = None) -> None:
    """``n`` POST /rollout as the container client sends them (streamed, capped read):
    through the client's ``send``, or ``straight`` to that transport (as rollouts go now)."""
    import httpx

    from optimizer.runtime.rollouts.lanes import lane_extensions

    numbers = iter(range(n))
    headers = {**http.headers, "Content-Type": "application/json"}

    async def worker(lane: int) -> None:
        for i in numbers:
            if straight is None:
                request = http.build_request(
                    "POST", f"{url}/rollout", content=_rollout_body(i),
                    headers={"Content-Type": "application/json"},
                    extensions=lane_extensions({}, lane),
                )  # fmt: skip
                response = await http.send(request, stream=True)
            else:
                request = httpx.Request(
                    "POST", f"{url}/rollout", content=_rollout_body(i), headers=headers,
                    extensions=lane_extensions({"timeout": http.timeout.as_dict()}, lane),
                )  # fmt: skip
                response = await straight.handle_async_request(request)
                response.request = request
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
            await response.aclose()
            json.loads(body)

    await asyncio.gather(*(worker(lane) for lane in range(concurrency)))


def _pool_per_lane(limits: Any) -> Any:
    """httpx's own transport, one pool per worker: the container client's before plain HTTP."""
    import httpx

    from optimizer.runtime.rollouts.lanes import LANE

    class PoolPerLane(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.pools: dict[Any, httpx.AsyncHTTPTransport] = {}

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            lane = request.extensions.get(LANE)
            if lane not in self.pools:
                self.pools[lane] = httpx.AsyncHTTPTransport(limits=limits)
            return await self.pools[lane].handle_async_request(request)

        async def aclose(self) -> None:
            for pool in self.pools.values():
                await pool.aclose()

    return PoolPerLane()


def http_figures(n: int, concurrency: int, rounds: int, latency: float = 0.01) -> None:
    """CPU per request of both transports, alternating, ``rounds`` times."""
    import httpx
    from dispatch_bench import noop_container

    from transport.http11 import PlainHTTPTransport

    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    transports = {  # name -> (transport, sent straight to it)
        "httpx (httpcore, a pool a worker)": (lambda: _pool_per_lane(limits), False),
        "PlainHTTPTransport": (lambda: PlainHTTPTransport(limits=limits), False),
        "PlainHTTPTransport, sent straight": (lambda: PlainHTTPTransport(limits=limits), True),
    }
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with noop_container(latency) as url:
        for _ in range(rounds):
            for name, (make, straight) in transports.items():

                async def run(make: Any = make, straight: bool = straight) -> None:
                    transport = make()
                    async with httpx.AsyncClient(transport=transport, timeout=60) as http:
                        await _post_all(http, url, n, concurrency, transport if straight else None)

                started = time.process_time()
                asyncio.run(run())
                per = (time.process_time() - started) / n * 1e6
                print(f"{name:36s} {per:7.1f} us CPU a request (n={n}, {concurrency} workers)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


# the profiled child process


def child(out: Path, argv: list[str]) -> int:
    """Run the CLI under one profiler per thread; write the stats and CPU figures."""
    profiles: list[cProfile.Profile] = []

    def start_thread_profile(frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        profile.enable()

    threading.setprofile(start_thread_profile)
    main_profile = cProfile.Profile(time.thread_time)
    main_profile.enable()
    try:
        from optimizer.cli import main as cli_main

        code = cli_main(argv)
    finally:
        main_profile.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(main_profile)
    main_cpu = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    for profile in profiles:
        stats.add(profile)
    stats.dump_stats(str(out))
    total = time.process_time()
    out.with_suffix(".json").write_text(json.dumps({"main_cpu": main_cpu, "process_cpu": total}))
    return code


# the report


def _where(file: str) -> str:
    """A package name for a profiled function's file."""
    if file.startswith("~") or file == "~":
        return "builtins (C)"
    path = Path(file)
    parts = path.parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    try:
        return path.relative_to(ROOT).parts[0].removesuffix(".py")
    except ValueError:
        pass
    if file.startswith("<frozen"):
        return "importlib (frozen)"
    return f"stdlib {path.parent.name if path.parent.name != 'python3.11' else path.stem}"


def _builtin_group(name: str) -> str:
    found = re.search(r"of '([\w.]+)", name) or re.search(r"method ([\w.]+)", name)
    return f"C: {found.group(1).split('.')[0]}" if found else "C: other"


def report(prof: Path, top: int) -> None:
    """Print the profiled run's figures (see the module docstring)."""
    stats = pstats.Stats(str(prof))
    figures = json.loads(prof.with_suffix(".json").read_text())
    rows = stats.stats  # type: ignore[attr-defined]
    own = sum(row[2] for row in rows.values())
    imports = sum(
        row[3]
        for (file, _, name), row in rows.items()
        if name == "_find_and_load" and "frozen" in file
    )
    print(f"profiled run: process CPU {figures['process_cpu']:.2f} s (profiler included); "
          f"main thread {figures['main_cpu']:.2f} s, other threads "
          f"{own - figures['main_cpu']:.2f} s; importing {imports:.2f} s")  # fmt: skip
    by_package: dict[str, float] = defaultdict(float)
    for (file, _, name), row in rows.items():
        key = _builtin_group(name) if file == "~" else _where(file)
        by_package[key] += row[2]
    print("\nown CPU by package (share of all profiled CPU):")
    for name, seconds in sorted(by_package.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {seconds:7.3f} s  {100 * seconds / own:5.1f}%  {name}")
    print(f"\ntop {top} functions by own CPU:")
    print("   own s   cum s    calls  function")
    ranked = sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]
    for (file, line, name), (_, calls, tt, ct, _) in ranked:
        where = name if file == "~" else f"{_short(file)}:{line}({name})"
        print(f"  {tt:6.3f}  {ct:6.3f}  {calls:7d}  {where}")


def _short(file: str) -> str:
    path = Path(file)
    if "site-packages" in path.parts:
        return "/".join(path.parts[path.parts.index("site-packages") + 1 :])
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return path.name


# the parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="additive", choices=("additive", "interacting", "noisy"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-flight", type=int, default=1, help="proposals in flight (ours-N)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiplies both latencies")
    parser.add_argument("--repeat", type=int, default=5, help="runs per import figure")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    parser.add_argument(
        "--no-compile", action="store_true", help="do not byte-compile our packages first"
    )
    parser.add_argument("--save", type=Path, default=None, help="keep the cProfile stats here")
    parser.add_argument("--http", action="store_true", help="the transports alone (see above)")
    parser.add_argument("--http-n", type=int, default=1000)
    parser.add_argument("--http-concurrency", type=int, default=8)
    parser.add_argument("--http-rounds", type=int, default=2)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.child is not None:
        return child(args.child, [a for a in rest if a != "--"])

    if args.http:
        http_figures(args.http_n, args.http_concurrency, args.http_rounds)
        return 0
    import race  # the arena and the measured process, as the race has them

    if not args.no_compile:
        race.byte_compile()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for name, seconds in import_figures(args.repeat).items():
        print(f"{name:28s} {seconds:.3f} s CPU (median of {args.repeat})")
    settings = argparse.Namespace(
        latency=0.3, reflection_latency=4.0, time_scale=args.time_scale,
        reflection_errors="none", gepa_budget=None, concurrency=None,
    )  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="cpu-profile-") as tmp,
        race.simulated(args.task, args.seed, settings) as arena,
    ):
        env = {**os.environ, **arena.env}
        result = race.run_ours(arena, args.in_flight, Path(tmp))
        print(f"\nours-{args.in_flight} {args.task} seed {args.seed}: CPU {result.cpu_s:.2f} s, "
              f"peak RSS {result.peak_rss_mb:.0f} MB, wall {result.wall_s:.1f} s, "
              f"{result.container_calls} container calls, {result.reflection_calls} reflections "
              f"(load average {os.getloadavg()[0]:.2f})")  # fmt: skip
        if args.no_profile:
            return 0
        arena.reset()
        prof = Path(tmp) / "run.prof"
        workspace = Path(tmp) / "profiled"
        cmd = [PYTHON, __file__, "--child", str(prof), "--",
               *ours_args(arena, args.in_flight, workspace)]  # fmt: skip
        done = race._measured(cmd, env)
        if done.returncode != 0:
            raise SystemExit(f"the profiled run failed:\n{done.stderr[-3000:]}")
        calls, reflections, _ = arena.stats()
        print(f"\nprofiled run: CPU by os.wait4 {done.cpu_s:.2f} s, {calls} container calls, "
              f"{reflections} reflections")  # fmt: skip
        report(prof, args.top)
        if args.save:
            args.save.write_bytes(prof.read_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
