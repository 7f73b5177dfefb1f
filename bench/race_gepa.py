"""The gepa-ai side of the race: gepa 0.1.4's ``optimize()`` on a gepa-container/1 program.

Runs under the interpreter from ``bench/gepa_env.py`` (stdlib + gepa + httpx only; nothing of
ours is imported, so the rival gets no help and no handicap from our code):

    PY=$(.venv/bin/python bench/gepa_env.py)
    $PY bench/race_gepa.py --container http://127.0.0.1:8701 \\
        --reflection-base-url http://127.0.0.1:8702/v1 --reflection-model sim \\
        --max-metric-calls 300 --concurrency 8 --seed 0 --mode pxn --pxn 2x2 --out gepa.json

gepa sees trainset = valset = the program's train seeds, so its "full valset evaluations" are
the train scores we compare across tools. Every container POST is counted here, including the
holdout evaluation of the seed and of gepa's best candidate that follows the search.

Errors, one tree (the message always names the URL)::

    RaceError
    ├── RequestRejected      a 4xx other than 429: our request is wrong, never retried
    ├── ServiceUnavailable   429 / 5xx / transport faults that outlasted every retry
    └── ProtocolViolation    a 200 whose body breaks gepa-container/1 or the OpenAI shape
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from gepa import optimize
from gepa.core.adapter import EvaluationBatch
from gepa.strategies.proposal_sampling import PxNSampling
from race_clock import ClockError, RunClock

TOOL = "gepa-ai 0.1.4"


class RaceError(RuntimeError):
    """Root of the runner's errors; ``main`` reports any of them and exits 1."""


class RequestRejected(RaceError):
    """A 4xx other than 429: the request is wrong, so retrying cannot help."""


class ServiceUnavailable(RaceError):
    """Infrastructure faults (429, 5xx, timeouts, dropped connections) outlasted the retries."""


class ProtocolViolation(RaceError):
    """A 200 whose body is not what the protocol promises."""


@dataclass(frozen=True)
class RaceConfig:
    """One run's settings, straight from the command line."""

    container: str
    reflection_base_url: str
    reflection_model: str
    max_metric_calls: int
    concurrency: int
    seed: int
    mode: str
    pxn: tuple[int, int] | None
    minibatch_size: int
    reflection_max_tokens: int
    reflection_temperature: float
    reflection_timeout: float
    rollout_timeout: float
    batch_evaluate: bool
    verbose: bool
    run_id: str
    out: Path
    run_dir: Path | None = None


@dataclass(frozen=True)
class Retry:
    """Backoff for infrastructure faults: ``attempts`` tries, delays doubling from ``base_s``."""

    attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 8.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based); honours Retry-After."""
        hint = response.headers.get("retry-after") if response is not None else None
        if hint is not None and hint.replace(".", "", 1).isdigit():
            return min(float(hint), 30.0)
        return min(self.base_s * 2**attempt, self.cap_s)


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    retry: Retry,
    on_attempt: Callable[[], None] = lambda: None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Send one request and return the JSON reply, retrying 429, 5xx and transport errors.

    Any other 4xx raises ``RequestRejected`` at once; faults that outlast ``retry`` raise
    ``ServiceUnavailable``. ``on_attempt`` runs before every HTTP attempt, so callers can count
    the requests they made (retries included). ``kwargs`` go to ``client.request``.
    """
    last = ""
    for attempt in range(retry.attempts):
        response: httpx.Response | None = None
        on_attempt()
        try:
            response = client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if response.status_code == 200:
                try:
                    reply = response.json()
                except ValueError as exc:
                    raise ProtocolViolation(f"{url} answered 200 with non-JSON: {exc}") from exc
                if not isinstance(reply, dict):
                    raise ProtocolViolation(f"{url} answered 200 with a non-object: {reply!r:.200}")
                return reply
            if response.status_code != 429 and response.status_code < 500:
                raise RequestRejected(
                    f"{url} rejected the request with HTTP {response.status_code}: "
                    f"{response.text[:500]}"
                )
            last = f"HTTP {response.status_code}: {response.text[:200]}"
        if attempt + 1 < retry.attempts:
            time.sleep(retry.delay(attempt, response))
    raise ServiceUnavailable(f"{url} still failing after {retry.attempts} attempts ({last})")


def candidate_id(candidate: Mapping[str, str]) -> str:
    """A content hash, so the same text always gets the same id across calls."""
    digest = hashlib.sha256(json.dumps(candidate, sort_keys=True).encode()).hexdigest()
    return f"c-{digest[:12]}"


def first_user_message(trace: Any) -> str | None:
    """The text of the first ``user`` message in a rollout trace, if there is one."""
    messages = trace.get("messages") if isinstance(trace, dict) else None
    for message in messages or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content)
    return None


class ContainerAdapter:
    """gepa's ``GEPAAdapter`` over a gepa-container/1 endpoint; data instances are seed names.

    Rollouts go through one thread pool of ``concurrency`` workers and one ``httpx.Client``, so
    at most ``concurrency`` POSTs are in flight. ``batch_evaluate`` (gepa's optional hook) puts
    every rollout of several (candidate, batch) pairs in that pool at once; without it gepa
    evaluates a PxN iteration's parents, children and accepted candidates one pair at a time.
    A full evaluation on the valset while ``searching`` appends ``(t, mean)`` to the timeline.
    """

    def __init__(
        self,
        cfg: RaceConfig,
        client: httpx.Client,
        pool: ThreadPoolExecutor,
        valset: Sequence[str],
        clock: RunClock,
    ) -> None:
        self._cfg = cfg
        self._client = client
        self._pool = pool
        self._valset = frozenset(valset)
        self._clock = clock
        self._lock = threading.Lock()
        self._retry = Retry()
        self.posts = 0
        self.rollouts = 0
        self.searching = True
        self.timeline = clock.timeline
        self.best_timeline = clock.best_timeline
        if not cfg.batch_evaluate:
            # gepa looks the hook up with getattr; shadowing it with None selects its fallback.
            self.batch_evaluate = None  # type: ignore[assignment]

    # gepa reads this attribute; None means "use gepa's own reflection prompt".
    propose_new_texts = None

    def _count_post(self) -> None:
        with self._lock:
            self.posts += 1

    def _rollout(self, candidate: dict[str, str], seed: str) -> dict[str, Any]:
        body = {
            "run_id": self._cfg.run_id,
            "candidate_id": candidate_id(candidate),
            "candidate": candidate,
            "seed": seed,
            "policy": {"model": None},
            "return_trace": True,
        }
        reply = request_json(
            self._client,
            "POST",
            f"{self._cfg.container}/rollout",
            self._retry,
            self._count_post,
            json=body,
            timeout=self._cfg.rollout_timeout,
        )
        reward = reply.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            raise ProtocolViolation(
                f"rollout of seed {seed!r} has no numeric reward: {reply!r:.300}"
            )
        with self._lock:
            self.rollouts += 1
        feedback = reply.get("feedback") or ""
        if reply.get("error"):
            feedback = f"{feedback}\nerror: {reply['error']}".strip()
        return {
            "seed": seed,
            "input": first_user_message(reply.get("trace")) or f"seed {seed}",
            "output": reply.get("output"),
            "feedback": feedback,
            "reward": float(reward),
        }

    def evaluate_pairs(
        self, items: Sequence[tuple[dict[str, str], Sequence[str]]], capture_traces: bool
    ) -> list[EvaluationBatch]:
        """Roll out every (candidate, batch) pair through the shared pool; results in order.

        Called from gepa's thread only: the pool's workers never submit, so it cannot deadlock.
        The first failed rollout cancels the queued rest and raises.
        """
        futures: list[list[Future[dict[str, Any]]]] = [
            [self._pool.submit(self._rollout, dict(cand), seed) for seed in batch]
            for cand, batch in items
        ]
        try:
            results = [[f.result() for f in row] for row in futures]
        except BaseException:
            for row in futures:
                for f in row:
                    f.cancel()
            raise
        batches = []
        # Each finished pair on the full valset is one gepa "full evaluation": a timeline point.
        for (_, batch), rows in zip(items, results, strict=True):
            scores = [r["reward"] for r in rows]
            batches.append(
                EvaluationBatch(
                    outputs=[r["output"] for r in rows],
                    scores=scores,
                    trajectories=rows if capture_traces else None,
                )
            )
            if self.searching and len(batch) == len(self._valset) and set(batch) == self._valset:
                self._record_full_eval(sum(scores) / len(scores))
        if self.searching:
            self._clock.save(self.posts)
        return batches

    def _record_full_eval(self, mean: float) -> None:
        t = self._clock.now()
        self.timeline.append((t, mean))
        best = max(mean, self.best_timeline[-1][1]) if self.best_timeline else mean
        self.best_timeline.append((t, best))

    def evaluate(
        self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        """Roll ``candidate`` out on every seed of ``batch``; scores are the rewards."""
        return self.evaluate_pairs([(candidate, batch)], capture_traces)[0]

    def batch_evaluate(
        self, items: list[tuple[dict[str, str], list[str]]]
    ) -> list[EvaluationBatch]:
        """Several (candidate, batch) pairs through the shared pool at once, with trajectories."""
        return self.evaluate_pairs(items, capture_traces=True)

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        """Per component the records gepa's default adapter builds: inputs, outputs, feedback.

        The container's feedback is about the whole program, so every component gets all of it.
        """
        if not eval_batch.trajectories:
            raise ProtocolViolation("make_reflective_dataset needs trajectories (capture_traces)")
        records = [
            {
                "Inputs": t["input"],
                "Generated Outputs": t["output"]
                if isinstance(t["output"], str)
                else json.dumps(t["output"], ensure_ascii=False),
                "Feedback": t["feedback"],
            }
            for t in eval_batch.trajectories
        ]
        return {name: list(records) for name in components_to_update}


class ReflectionLM:
    """gepa's reflection LM over an OpenAI-compatible ``/chat/completions`` endpoint.

    ``batch_complete`` sends its prompts from one thread each, so gepa's PxN reflections really
    overlap. Counts calls, failures and the most calls in flight at once.
    """

    def __init__(self, cfg: RaceConfig, client: httpx.Client) -> None:
        self._cfg = cfg
        self._client = client
        self._url = f"{cfg.reflection_base_url.rstrip('/')}/chat/completions"
        self._lock = threading.Lock()
        self._in_flight = 0
        self.calls = 0
        self.attempts = 0
        self.failures = 0
        self.max_in_flight = 0

    def _count_attempt(self) -> None:
        with self._lock:
            self.attempts += 1

    def _complete(self, messages: list[dict[str, Any]]) -> str:
        body = {
            "model": self._cfg.reflection_model,
            "messages": messages,
            "max_tokens": self._cfg.reflection_max_tokens,
            "temperature": self._cfg.reflection_temperature,
        }
        with self._lock:
            self.calls += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            reply = request_json(
                self._client,
                "POST",
                self._url,
                Retry(attempts=4),
                self._count_attempt,
                json=body,
                timeout=self._cfg.reflection_timeout,
            )
            try:
                return reply["choices"][0]["message"]["content"] or ""
            except (KeyError, IndexError, TypeError) as exc:
                raise ProtocolViolation(
                    f"{self._url} reply has no message: {reply!r:.300}"
                ) from exc
        except RaceError:
            # gepa catches reflection errors and drops the proposal silently; count them here.
            with self._lock:
                self.failures += 1
            raise
        finally:
            with self._lock:
                self._in_flight -= 1

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        """One completion for a prompt string or a chat message list."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return self._complete(messages)

    def batch_complete(self, messages_list: list[list[dict[str, Any]]]) -> list[str]:
        """All completions at once, one thread each; answers in request order."""
        if not messages_list:
            return []
        with ThreadPoolExecutor(max_workers=len(messages_list)) as pool:
            return list(pool.map(self._complete, messages_list))


class GepaLog:
    """gepa's ``LoggerProtocol``: discards its per-iteration chatter unless ``verbose``."""

    def __init__(self, verbose: bool) -> None:
        self._verbose = verbose

    def log(self, message: str) -> None:
        """Forward to stderr when verbose, so stdout keeps only the summary line."""
        if self._verbose:
            print(f"[gepa] {message}", file=sys.stderr, flush=True)


def _mean(scores: Sequence[float]) -> float | None:
    return sum(scores) / len(scores) if scores else None


def run(cfg: RaceConfig) -> dict[str, Any]:
    """Search with gepa, evaluate seed and best on holdout, and return the result record."""
    # The pool already caps rollouts in flight; the connection limit only has to match it.
    limits = httpx.Limits(
        max_connections=cfg.concurrency, max_keepalive_connections=cfg.concurrency
    )
    headers = {"Authorization": "Bearer dummy"}
    with (
        httpx.Client(limits=limits) as client,
        httpx.Client(headers=headers) as llm_client,
        ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="rollout") as pool,
    ):
        # started_at (epoch) lets a caller put the timeline on its own clock; a resumed run's
        # clock starts earlier_s before it, when the first session started.
        clock = RunClock(cfg.run_dir)
        started_at = time.time()
        program = request_json(client, "GET", f"{cfg.container}/program", Retry(), timeout=30)
        try:
            train = list(program["seeds"]["train"])
            holdout = list(program["seeds"].get("holdout") or [])
            seed_candidate = {c["name"]: c["text"] for c in program["components"]}
        except (KeyError, TypeError, AttributeError) as exc:
            raise ProtocolViolation(
                f"GET /program body lacks seeds or components: {exc!r}"
            ) from exc
        if not train or not seed_candidate:
            raise ProtocolViolation(
                f"program {program.get('program_id')!r} has no train seeds or no components"
            )

        adapter = ContainerAdapter(cfg, client, pool, valset=train, clock=clock)
        reflection = ReflectionLM(cfg, llm_client)
        extra = (
            {"sampling_strategy": PxNSampling(*cfg.pxn)} if cfg.mode == "pxn" and cfg.pxn else {}
        )
        result = optimize(
            seed_candidate=seed_candidate,
            trainset=train,
            valset=train,
            adapter=adapter,
            reflection_lm=reflection,
            max_metric_calls=cfg.max_metric_calls,
            seed=cfg.seed,
            reflection_minibatch_size=cfg.minibatch_size,
            logger=GepaLog(cfg.verbose),
            run_dir=str(cfg.run_dir) if cfg.run_dir else None,
            **extra,
        )
        search_s = clock.now()
        adapter.searching = False
        clock.save(adapter.posts)

        best = dict(result.best_candidate)
        posts_before_holdout = adapter.posts
        holdout_baseline = holdout_best = None
        if holdout:
            pairs = [(seed_candidate, holdout)]
            if best != seed_candidate:  # the same text on the same seeds would repeat rollouts
                pairs.append((best, holdout))
            evals = adapter.evaluate_pairs(pairs, capture_traces=False)
            holdout_baseline = _mean(evals[0].scores)
            holdout_best = _mean(evals[-1].scores)
        wall_s = clock.now()

    scores = result.val_aggregate_scores
    return {
        "tool": TOOL,
        "mode": cfg.mode,
        "pxn": f"{cfg.pxn[0]}x{cfg.pxn[1]}" if cfg.mode == "pxn" and cfg.pxn else None,
        "seed": cfg.seed,
        "program_id": program.get("program_id"),
        "max_metric_calls": cfg.max_metric_calls,
        "concurrency": cfg.concurrency,
        "minibatch_size": cfg.minibatch_size,
        "batch_evaluate": cfg.batch_evaluate,
        "started_at": started_at,
        "earlier_s": round(clock.earlier_s, 3),
        "sessions": clock.sessions,
        "wall_s": round(wall_s, 3),
        "search_s": round(search_s, 3),
        # a resumed run: earlier sessions' calls included (gepa evaluates the seed candidate on
        # the valset again each time it starts, before it loads its saved state)
        "container_calls_made": clock.earlier_posts + adapter.posts,
        "container_retries": adapter.posts - adapter.rollouts,  # this session's
        "holdout_calls": adapter.posts - posts_before_holdout,
        "metric_calls": result.total_metric_calls,
        "full_val_evals": result.num_full_val_evals,
        "reflection_calls": reflection.calls,
        "reflection_attempts": reflection.attempts,
        "reflection_failures": reflection.failures,
        "reflection_max_in_flight": reflection.max_in_flight,
        "candidates": result.num_candidates,
        "train_size": len(train),
        "holdout_size": len(holdout),
        "train_baseline": scores[0],
        "train_best": scores[result.best_idx],
        "holdout_baseline": holdout_baseline,
        "holdout_best": holdout_best,
        "timeline": [[round(t, 3), m] for t, m in adapter.timeline],
        "best_timeline": [[round(t, 3), m] for t, m in adapter.best_timeline],
        "best_candidate": best,
    }


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def summary_line(record: Mapping[str, Any], out: Path) -> str:
    """The one line printed after a run."""
    r = record
    mode = f"pxn {r['pxn']}" if r["pxn"] else r["mode"]
    return (
        f"{r['tool']} {mode} seed={r['seed']}: wall {r['wall_s']:.1f}s (search {r['search_s']:.1f}s)"
        f" | container calls {r['container_calls_made']} (holdout {r['holdout_calls']},"
        f" gepa metric calls {r['metric_calls']}/{r['max_metric_calls']})"
        f" | reflections {r['reflection_calls']} (max {r['reflection_max_in_flight']} at once"
        f"{', FAILED ' + str(r['reflection_failures']) if r['reflection_failures'] else ''})"
        f" | candidates {r['candidates']}"
        f" | train {_fmt(r['train_baseline'])} -> {_fmt(r['train_best'])}"
        f" | holdout {_fmt(r['holdout_baseline'])} -> {_fmt(r['holdout_best'])} | {out}"
        + (f" | resumed: {r['sessions']} sessions" if r.get("sessions", 1) > 1 else "")
    )


def parse_args(argv: Sequence[str] | None = None) -> RaceConfig:
    """Read the command line into a ``RaceConfig``; bad values exit with argparse's message."""
    p = argparse.ArgumentParser(description="Run gepa-ai 0.1.4 on a gepa-container/1 program.")
    p.add_argument("--container", required=True, help="container base URL")
    p.add_argument("--reflection-base-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    p.add_argument("--reflection-model", required=True)
    p.add_argument("--max-metric-calls", type=int, required=True)
    p.add_argument("--concurrency", type=int, default=8, help="rollouts in flight at most")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=("seq", "pxn"), required=True)
    p.add_argument("--pxn", help="PxN sampling for --mode pxn (default 2x2)")
    p.add_argument("--minibatch-size", type=int, default=3)
    p.add_argument("--reflection-max-tokens", type=int, default=2048)
    p.add_argument("--reflection-temperature", type=float, default=0.7)
    p.add_argument("--reflection-timeout", type=float, default=600.0, help="seconds per call")
    p.add_argument("--rollout-timeout", type=float, default=300.0, help="seconds per rollout")
    p.add_argument(
        "--no-batch-evaluate",
        action="store_true",
        help="leave gepa's sequential per-pair fallback in place of batch_evaluate",
    )
    p.add_argument("--verbose", action="store_true", help="gepa's log to stderr")
    p.add_argument("--run-id", help="run_id sent with every rollout (default: generated)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--run-dir",
        type=Path,
        help="gepa's run_dir: its state is saved there after every iteration, and a run started"
        " again with the same folder resumes where it stopped (wall time included)",
    )
    a = p.parse_args(argv)
    pxn: tuple[int, int] | None = None
    if a.mode == "pxn":
        m = re.fullmatch(r"(\d+)x(\d+)", a.pxn or "2x2")
        if not m or int(m[1]) < 1 or int(m[2]) < 1:
            p.error(f"--pxn must look like 2x2 (P parents x N mutations, both >= 1), not {a.pxn!r}")
        pxn = (int(m[1]), int(m[2]))
    elif a.pxn:
        p.error("--pxn only applies to --mode pxn")
    if a.max_metric_calls < 1 or a.concurrency < 1 or a.minibatch_size < 1:
        p.error("--max-metric-calls, --concurrency and --minibatch-size must be >= 1")
    return RaceConfig(
        container=a.container.rstrip("/"),
        reflection_base_url=a.reflection_base_url,
        reflection_model=a.reflection_model,
        max_metric_calls=a.max_metric_calls,
        concurrency=a.concurrency,
        seed=a.seed,
        mode=a.mode,
        pxn=pxn,
        minibatch_size=a.minibatch_size,
        reflection_max_tokens=a.reflection_max_tokens,
        reflection_temperature=a.reflection_temperature,
        reflection_timeout=a.reflection_timeout,
        rollout_timeout=a.rollout_timeout,
        batch_evaluate=not a.no_batch_evaluate,
        verbose=a.verbose,
        run_id=a.run_id or f"gepa-ai-{a.mode}-s{a.seed}-{uuid.uuid4().hex[:8]}",
        out=a.out,
        run_dir=a.run_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run, write ``--out``, print the summary; a ``RaceError`` or a ``ClockError`` (an
    unreadable ``race_clock.json``) exits 1 with its message."""
    cfg = parse_args(argv)
    try:
        record = run(cfg)
    except (RaceError, ClockError) as exc:
        print(f"race_gepa: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(json.dumps(record, indent=2) + "\n")
    if record["reflection_failures"]:
        # gepa drops a proposal whose reflection raised and carries on; say so loudly.
        print(
            f"race_gepa: warning: {record['reflection_failures']} of {record['reflection_calls']}"
            " reflection calls failed; gepa skipped those proposals",
            file=sys.stderr,
        )
    print(summary_line(record, cfg.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
