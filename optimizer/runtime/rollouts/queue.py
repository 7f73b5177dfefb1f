"""The rollout queue: candidate x seed jobs, cache first, bounded concurrency, durable results.

``evaluate(candidate, seeds)`` looks every seed up in the rollout cache, books the misses
against the budget (all or nothing, so a candidate is never half-evaluated by a budget), and
queues them. ``concurrency`` workers take jobs in submission order, so one candidate's
rollouts run together (the student's prompt cache then hits). Finished rollouts go to one
committer that writes them in batched transactions; a rollout counts (budget, futures,
events) only after its transaction committed, so a killed run never counts what it lost.
A (candidate, seed) already in flight for another caller is not sent twice: the second caller
waits for the first one's result (concurrent proposals often write the same text). Across
processes sharing the store, each rollout is claimed before it is sent
(:mod:`optimizer.runtime.rollouts.claims`): one that another runner is paying for is waited
for and served from the cache, free.

A rollout that fails after its retries (``RolloutFailed``) or answers a body that cannot be scored
(``InvalidRollout``: a NaN or out-of-range reward, a negative cost, an oversized body) is one
errored record: stored with its reason, never scored or cached, and counted by the ``ErrorGate``
(:mod:`optimizer.runtime.rollouts.gate`), which stops the run only when errors pass
``--max-error-rate``, and then says what they were and what to change.

A paused run (:mod:`optimizer.runtime.steering`) sends nothing new: each worker awaits
``hold()`` after it took a job and before it dispatches it; rollouts already sent finish and
are committed.

While it runs, the queue's workers hold a share of each container URL's adaptive limit
(``client.join``; :mod:`optimizer.runtime.rollouts.limits`), shared through the workspace with
the other runners that call the URL (:mod:`optimizer.runtime.rollouts.shared_limits`), and a
:class:`LimitWatch` tells the run about those limits: ``concurrency`` events, and warnings while
a URL rate-limits it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.accounts.objectives import StudentPricing
from optimizer.runtime.rollouts.bodies import CandidateBody
from optimizer.runtime.rollouts.claims import ClaimBook, claim_wait_s
from optimizer.runtime.rollouts.client import ContainerClient, RolloutOutcome
from optimizer.runtime.rollouts.gate import ErrorGate
from optimizer.runtime.rollouts.limit_watch import LimitWatch
from optimizer.runtime.rollouts.records import SeedResult, scored_record
from optimizer.runtime.rollouts.seed_failures import SetAside, failure_kind
from optimizer.runtime.rollouts.shared_limits import SharedLimits
from schemas import (
    InvalidRollout,
    Policy,
    Program,
    RolloutFailed,
    RolloutRecord,
    Trial,
    cache_key,
    content_hash,
    policy_key,
)
from workspace import Workspace

__all__ = ["RolloutQueue"]

FEEDBACK_IN_EVENTS = 400


@dataclass(frozen=True)
class _Job:
    candidate_id: str
    candidate_hash: str
    body: CandidateBody  # one per candidate and call: its seeds share the encoding
    seed: str
    key: str


# A finished rollout on its way to the committer: record, retries, failure kind, waiter.
_Done = tuple[RolloutRecord, int, str, asyncio.Future[RolloutRecord]]
# Told the results of every evaluation: (candidate id, components, results by seed).
ResultsObserver = Callable[[str, Mapping[str, str], Mapping[str, SeedResult]], None]


async def _go() -> None:
    """The hold of a run nobody steers: dispatch at once."""


class RolloutQueue:
    """Runs (candidate, seed) rollouts for one run. Use as ``async with``."""

    def __init__(
        self,
        *,
        client: ContainerClient,
        workspace: Workspace,
        run_id: str,
        program: Program,
        budget: Budget,
        events: EventSink,
        concurrency: int = 4,
        policy: Policy | None = None,
        error_gate: ErrorGate | None = None,
        on_set_aside: Callable[[SetAside], Awaitable[None]] | None = None,
        watch_every_s: float = 1.0,
        hold: Callable[[], Awaitable[None]] | None = None,
        pricing: StudentPricing | None = None,
        on_results: ResultsObserver | None = None,
    ) -> None:
        self._client = client
        self._workspace = workspace
        self._run_id = run_id
        self._fingerprint = program.fingerprint
        self._budget = budget
        self._events = events
        self._concurrency = concurrency
        self._policy = policy or Policy()
        self._policy_key = policy_key(self._policy)
        self._gate = error_gate or ErrorGate(max_rate=1.0)
        self._on_set_aside = on_set_aside  # told after the seed_set_aside event
        self._hold = hold or _go  # returns when the run may dispatch (a paused run waits there)
        self._pricing = pricing or StudentPricing()  # the student's dollars, for the budget
        self._on_results = on_results  # e.g. the state's objective table
        # (background?, batch, index): a batch is sent in the order it was asked for, and
        # background work (the baseline's holdout) only when nothing else waits.
        self._jobs: asyncio.PriorityQueue[
            tuple[bool, int, int, _Job, asyncio.Future[RolloutRecord]]
        ] = asyncio.PriorityQueue()
        self._reward_range = program.reward_range
        self._done: asyncio.Queue[_Done] = asyncio.Queue()
        self._batches = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._inflight: dict[str, asyncio.Future[RolloutRecord]] = {}
        self._watch = LimitWatch(
            client.limits_view,
            events.emit,
            concurrency=concurrency,
            wait_s=client.policy.rate_limit_wait_s,
            period_s=watch_every_s,
        )
        self._claims = ClaimBook(
            workspace,
            run_id,
            max_wait_s=claim_wait_s(client.policy, workspace.lease_timeout_s),
            on_takeover=lambda data: events.emit("claims", data),
        )
        self._shared = SharedLimits(workspace, client.limits())

    async def __aenter__(self) -> RolloutQueue:
        self._client.join(self._concurrency)
        await self._shared.sync_all()  # this run's part of each URL's limit, before it sends
        self._tasks = [asyncio.create_task(self._worker(i)) for i in range(self._concurrency)]
        self._tasks.append(asyncio.create_task(self._shared.run()))
        self._tasks.append(asyncio.create_task(self._watch.run()))
        self._tasks.append(asyncio.create_task(self._claims.run()))
        self._tasks.append(asyncio.create_task(self._committer()))  # last: _wait watches it
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.shield(self._claims.close())
        self._client.leave()
        await asyncio.shield(self._shared.close())

    def idle_slots(self) -> int:
        """Rollout slots no booked rollout waits for or runs in right now."""
        return max(0, self._concurrency - len(self._inflight))

    def budget_room(self) -> int | None:
        """Paid calls the end of the run may still book (None: no metric-call limit)."""
        return self._budget.final_room()

    def key_for(self, components: Mapping[str, str], seed: str) -> str:
        """The cache key of (candidate, seed) under this run's program and policy."""
        return cache_key(self._fingerprint, content_hash(dict(components)), seed, self._policy_key)

    async def evaluate(
        self,
        candidate_id: str,
        components: Mapping[str, str],
        seeds: Sequence[str],
        *,
        final: bool = False,
        prebooked: int = 0,
        background: bool = False,
    ) -> dict[str, SeedResult]:
        """Results for every seed, from the cache or from the container.

        Raises ``BudgetExhausted`` before sending anything when the misses do not fit the
        budget (``final`` may use the reserve kept for heldout selection). ``prebooked``
        calls were already reserved by the caller (``Budget.reserve``), which lets work
        started in the background hold its budget before its first await. ``background``
        rollouts wait while any other is queued: the search's gates are not held up behind
        a long holdout evaluation that is needed only at the end.
        """
        seeds = list(dict.fromkeys(seeds))
        chash = content_hash(dict(components))
        keys = {seed: cache_key(self._fingerprint, chash, seed, self._policy_key) for seed in seeds}
        aside = self._set_aside(candidate_id, chash, seeds, keys)  # not sent, not looked up
        hits = await self._workspace.lookup_many([k for s, k in keys.items() if s not in aside])
        misses = [seed for seed in seeds if keys[seed] not in hits and seed not in aside]
        shared = {
            seed: self._inflight[keys[seed]] for seed in misses if keys[seed] in self._inflight
        }
        fresh = [seed for seed in misses if seed not in shared]
        jobs: list[_Job] = []
        if fresh:  # checked before the budget is booked: components that are not text fail
            body = CandidateBody(self._run_id, candidate_id, components, self._policy)
            jobs = [_Job(candidate_id, chash, body, seed, keys[seed]) for seed in fresh]
        if len(fresh) >= prebooked:
            self._budget.reserve(len(fresh) - prebooked, final=final)
        else:
            self._budget.release(prebooked - len(fresh))
        # In flight from here, before any await: a caller that looks them up meanwhile waits
        # for these rollouts instead of sending them again.
        futures = self._book(jobs)
        try:
            results = {**aside, **await self._reuse(candidate_id, seeds, keys, hits)}
        except BaseException:
            self._unbook(jobs, futures)
            raise
        if fresh:
            results.update(await self._send(jobs, futures, background))
            self._gate.check()
        if shared:
            # Paid once by the caller that sent it; here it is a cache hit that arrived late.
            records = await self._wait([asyncio.shield(f) for f in shared.values()])
            for seed, record in zip(shared, records, strict=True):
                results[seed] = SeedResult(seed=seed, record=record, cached=True)
        ordered = {seed: results[seed] for seed in seeds}
        if self._on_results is not None:
            self._on_results(candidate_id, components, ordered)
        return ordered

    def _book(self, jobs: list[_Job]) -> dict[str, asyncio.Future[RolloutRecord]]:
        """A future per job, registered as in flight (``evaluate``'s ``shared``)."""
        loop = asyncio.get_running_loop()
        futures: dict[str, asyncio.Future[RolloutRecord]] = {}
        for job in jobs:
            futures[job.seed] = self._inflight[job.key] = loop.create_future()
        return futures

    def _unbook(self, jobs: list[_Job], futures: dict[str, asyncio.Future[RolloutRecord]]) -> None:
        """Booked calls never sent are released (a cancelled caller); nothing stays in flight."""
        self._budget.release(sum(1 for f in futures.values() if not f.done()))
        self._claims.abandon([job.key for job in jobs if not futures[job.seed].done()])
        for job in jobs:
            self._inflight.pop(job.key, None)
            futures[job.seed].cancel()

    async def _send(
        self,
        jobs: list[_Job],
        futures: dict[str, asyncio.Future[RolloutRecord]],
        background: bool,
    ) -> dict[str, SeedResult]:
        """Claim the booked ``jobs``, queue them as one batch, and wait for them all.

        A job another runner pays for is served when it stored it, as a cache hit.
        """
        batch = next(self._batches)
        order = {job.seed: index for index, job in enumerate(jobs)}
        served: set[str] = set()

        def send(job: _Job) -> None:
            self._jobs.put_nowait((background, batch, order[job.seed], job, futures[job.seed]))

        async def serve(job: _Job, record: RolloutRecord) -> None:
            served.add(job.seed)
            self._budget.release(1)
            await self._reuse(job.candidate_id, [job.seed], {job.seed: job.key}, {job.key: record})

        try:
            await self._claims.dispatch(jobs, {j.key: futures[j.seed] for j in jobs}, send, serve)
            records = await self._wait(list(futures.values()))
        finally:
            self._unbook(jobs, futures)
        return {
            seed: SeedResult(seed=seed, record=record, cached=seed in served)
            for seed, record in zip(futures, records, strict=True)
        }

    def _set_aside(
        self, candidate_id: str, chash: str, seeds: Sequence[str], keys: Mapping[str, str]
    ) -> dict[str, SeedResult]:
        """Results for the seeds set aside among ``seeds``: errors, never sent nor scored."""
        out: dict[str, SeedResult] = {}
        for seed in seeds:
            note = self._gate.set_aside.get(seed)
            if note is not None:
                record = RolloutRecord(
                    cache_key=keys[seed],
                    run_id=self._run_id,
                    candidate_id=candidate_id,
                    candidate_hash=chash,
                    fingerprint=self._fingerprint,
                    seed=seed,
                    policy=self._policy_key,
                    status="error",
                    attempts=0,
                    error=f"not sent: {note.describe()}",
                )
                out[seed] = SeedResult(seed=seed, record=record, cached=False, set_aside=True)
        return out

    async def _reuse(
        self,
        candidate_id: str,
        seeds: Sequence[str],
        keys: Mapping[str, str],
        hits: Mapping[str, RolloutRecord],
    ) -> dict[str, SeedResult]:
        """The cache hits among ``seeds``, counted and linked to this run as trials."""
        results: dict[str, SeedResult] = {}
        cached_trials = []
        for seed in seeds:
            if keys[seed] in hits:
                record = hits[keys[seed]]
                results[seed] = SeedResult(seed=seed, record=record, cached=True)
                cached_trials.append(self._trial(candidate_id, seed, record, cached=True))
        if cached_trials:
            self._budget.cached += len(cached_trials)
            await self._workspace.link_trials(self._run_id, cached_trials)
            await self._emit_trials([(results[t.seed].record, True) for t in cached_trials])
        return results

    async def cached(
        self, components: Mapping[str, str], seeds: Sequence[str]
    ) -> dict[str, SeedResult]:
        """The cached results among ``seeds``, read without counting a trial (no rollout)."""
        keys = self._keys(components, seeds)
        hits = await self._workspace.lookup_many(list(keys.values()))
        return {
            seed: SeedResult(seed=seed, record=hits[key], cached=True)
            for seed, key in keys.items()
            if key in hits
        }

    def _keys(self, components: Mapping[str, str], seeds: Sequence[str]) -> dict[str, str]:
        """``seed -> cache key`` of ``components`` on the seeds not set aside."""
        chash = content_hash(dict(components))
        return {
            seed: cache_key(self._fingerprint, chash, seed, self._policy_key)
            for seed in seeds
            if seed not in self._gate.set_aside
        }

    async def misses(self, components: Mapping[str, str], seeds: Sequence[str]) -> list[str]:
        """The seeds of ``seeds`` that ``evaluate`` would have to pay for now."""
        keys = self._keys(components, seeds)
        stored = await self._workspace.stored_ok(list(keys.values()))
        return [s for s, k in keys.items() if k not in stored and k not in self._inflight]

    async def _wait(self, futures: list[asyncio.Future[RolloutRecord]]) -> list[RolloutRecord]:
        """Gather the futures, unless the committer dies first (then raise its error)."""
        gathered: asyncio.Future[list[RolloutRecord]] = asyncio.ensure_future(
            asyncio.gather(*futures)
        )
        # Read its outcome even when nobody awaits it (a cancelled run), or asyncio logs
        # "exception was never retrieved" with a traceback.
        gathered.add_done_callback(lambda f: f.cancelled() or f.exception())
        committer = self._tasks[-1]
        waiting: list[asyncio.Future[Any]] = [gathered, committer]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not gathered.done():
            gathered.cancel()
            error = committer.exception() if not committer.cancelled() else None
            raise error or asyncio.CancelledError()
        return list(gathered.result())

    def _trial(self, candidate_id: str, seed: str, record: RolloutRecord, *, cached: bool) -> Trial:
        return Trial(
            run_id=self._run_id,
            candidate_id=candidate_id,
            seed=seed,
            cache_key=record.cache_key,
            cached=cached,
            status=record.status,
        )

    async def _worker(self, lane: int) -> None:
        """Run jobs one at a time; ``lane`` gives this worker a connection pool of its own."""
        while True:
            _, _, _, job, future = await self._jobs.get()
            await self._hold()
            while not self._workspace.reachable:  # what it paid now might never be stored
                await asyncio.sleep(0.1)
            if future.cancelled():
                continue
            try:
                outcome, retries = await self._client.rollout(
                    job.body.for_seed(job.seed),
                    reward_range=self._reward_range,
                    trace_cap_bytes=self._workspace.trace_cap_bytes,
                    lane=lane,
                )
            except (RolloutFailed, InvalidRollout) as exc:
                record = self._record(job, None, attempts=exc.attempts, error=str(exc))
                retries = exc.attempts - 1
                reason = failure_kind(exc)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting caller, not swallowed
                if not future.done():
                    future.set_exception(exc)
                continue
            else:
                assert outcome is not None
                record = self._record(job, outcome, attempts=outcome.attempts, error=None)
                reason = ""
            self._done.put_nowait((record, retries, reason, future))

    def _record(
        self, job: _Job, outcome: RolloutOutcome | None, *, attempts: int, error: str | None
    ) -> RolloutRecord:
        """The stored form of a finished rollout: scored (``outcome``) or an error."""
        ids = {
            "cache_key": job.key,
            "run_id": self._run_id,
            "candidate_id": job.candidate_id,
            "candidate_hash": job.candidate_hash,
            "fingerprint": self._fingerprint,
            "seed": job.seed,
            "policy": self._policy_key,
            "attempts": attempts,
        }
        if outcome is None:
            return RolloutRecord.model_validate({**ids, "status": "error", "error": error})
        return scored_record(ids, outcome)

    async def _committer(self) -> None:
        while True:
            batch = [await self._done.get()]
            while not self._done.empty() and len(batch) < 256:
                batch.append(self._done.get_nowait())
            try:
                await self._commit(batch)
            except BaseException as exc:
                # The store failed (or we are cancelled): nobody may wait forever on a
                # rollout that was never committed; the error reaches every waiting caller.
                failure = exc if isinstance(exc, Exception) else asyncio.CancelledError()
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(failure)
                raise

    async def _commit(self, batch: list[_Done]) -> None:
        records = [record for record, *_ in batch]
        await self._workspace.record_paid_trials(self._run_id, records, self._claims.claimant)
        for record, retries, reason, _ in batch:
            self._budget.settle(
                cost_usd=self._pricing.cost(record.usage) if record.status == "ok" else 0.0,
                error=record.status == "error",
                retries=retries,
                input_tokens=record.usage.input_tokens,
                output_tokens=record.usage.output_tokens,
            )
            note = self._gate.observe(record, reason)
            if note is not None:
                await self._events.emit("seed_set_aside", note.as_dict())
                if self._on_set_aside is not None:
                    await self._on_set_aside(note)
        # One event per committed batch: the feed stays live when rollouts are slow, and a
        # fast container does not pay one event transaction per rollout.
        await self._emit_trials([(record, False) for record in records])
        for record, *_, future in batch:
            if not future.done():
                future.set_result(record)

    async def _emit_trials(self, items: list[tuple[RolloutRecord, bool]]) -> None:
        await self._events.emit(
            "trials",
            {
                "trials": [
                    {
                        "candidate_id": record.candidate_id,
                        "seed": record.seed,
                        "reward": record.reward,
                        "status": record.status,
                        "cached": cached,
                        "feedback": (record.feedback or record.error or "")[:FEEDBACK_IN_EVENTS],
                    }
                    for record, cached in items
                ],
                "budget": self._budget.snapshot(),
            },
        )
