"""HTTP client of gepa-container/1: health checks, the program, and rollouts with retries.

Every request goes through one ``httpx.AsyncClient`` (injectable, so tests can pass an ASGI
transport); the one it makes itself keeps a connection pool per queue worker
(:mod:`optimizer.runtime.rollouts.lanes`). Infrastructure faults (429, 503, other 5xx, 408,
timeouts, dropped connections) are retried with exponential backoff and full jitter, honouring
``Retry-After``; a rollout that still fails is ``RolloutFailed`` (its ``reason`` says whether it
timed out), which the queue records as an error and never scores. A 4xx is the caller's fault:
``ProtocolViolation`` (or ``UserError`` for a refused token), never retried.

A 429 is the container's rate limit, not a fault of the rollout: it does not spend
``--max-retries``. The rollout waits (``Retry-After``, else a backoff that grows) and tries
again for as long as the endpoint has answered nothing but 429s for less than
``--rate-limit-wait`` seconds; then it fails with ``reason="rate_limit"``.

Each URL's rollouts in flight are bounded by its adaptive limit
(:mod:`optimizer.runtime.rollouts.limits`, shared by every run of the process): a request waits for
a slot and goes to the least busy URL with one (:mod:`optimizer.runtime.rollouts.endpoints`), and a
429/503 cuts that URL's limit. A connection refused by one URL while another is up is sent to the
other at once, without spending a retry: nothing reached the dead one. The waits and when a rollout
gives up: :mod:`optimizer.runtime.rollouts.retries`.

A ``200`` body is read as a stream and refused past ``max_response_bytes`` (nothing more is read),
then checked by :func:`schemas.parse_rollout`; either failure is ``InvalidRollout``, one errored
rollout, not retried. Memory bounds for huge answers: :mod:`optimizer.runtime.rollouts.bodies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ValidationError

from optimizer.runtime.rollouts.bodies import BodyReader, ParsedRollout, RolloutBody
from optimizer.runtime.rollouts.endpoints import Endpoint, Endpoints
from optimizer.runtime.rollouts.lanes import LaneTransport, env_proxies, lane_extensions
from optimizer.runtime.rollouts.limits import AdaptiveLimit, EndpointLimits, Ticket
from optimizer.runtime.rollouts.retries import RetryPolicy, Tries, retry_after
from schemas import (
    DEFAULT_REWARD_RANGE,
    PROTOCOL,
    ContainerUnavailable,
    Health,
    InvalidRollout,
    Program,
    ProtocolViolation,
    RolloutRequest,
    RolloutResponse,
    RunConfig,
    UserError,
)
from workspace.redact import Scrubber

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ContainerClient",
    "RetryPolicy",
    "RolloutOutcome",
    "client_for",
]

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0
# An error answer is read only this far: enough for its message, never a memory hazard.
ERROR_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class RolloutOutcome:
    """A finished rollout: the response, how many attempts it took, and its trace.

    The trace lives in ``trace`` (``response.trace`` is left empty so it is held once):
    the response's trace, shrunk to the workspace's trace cap when it was over it
    (``trace_truncated``), exactly what the workspace stores.
    """

    response: RolloutResponse
    attempts: int
    latency_ms: float
    url: str
    trace: dict[str, Any] = field(default_factory=dict)
    trace_truncated: bool = False
    body_bytes: int = 0


def _error_message(content: bytes | bytearray) -> str:
    """The ``{"error": {"type", "message"}}`` of an error answer as one line (or its start)."""
    try:
        body = json.loads(content)
    except ValueError:
        return bytes(content[:500]).decode("utf-8", "replace")
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(error)


class ContainerClient:
    """Talks to one or many container URLs; spreads rollouts to the least busy healthy one.

    ``limits`` holds the endpoints' adaptive limits (default: the event loop's, shared by
    every client of the process); a queue ``join``s them with its number of workers.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        token: str | None = None,
        policy: RetryPolicy | None = None,
        rng: random.Random | None = None,
        http: httpx.AsyncClient | None = None,
        max_connections: int = 64,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        limits: EndpointLimits | None = None,
    ) -> None:
        if not urls:
            raise UserError("no container URL: pass --container URL (or --module MODULE)")
        if max_response_bytes < 1024:
            raise UserError(f"max_response_bytes must be at least 1024, got {max_response_bytes}")
        self._endpoints = Endpoints(urls, limits or EndpointLimits.of_loop())
        self._policy = policy or RetryPolicy()
        self._max_response = max_response_bytes
        # Per request, so an injected client (shared by runs) still honours --rollout-timeout.
        self._timeout = httpx.Timeout(self._policy.timeout_s, connect=CONNECT_TIMEOUT_S)
        self._bodies = BodyReader()
        self._rng = rng or random.Random(0)
        # Per-request headers: an injected client may be shared by runs with other tokens.
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._rollout_headers = {**self._headers, "Content-Type": "application/json"}
        self._rollout_extensions = {"timeout": self._timeout.as_dict()}
        # What a container says goes into errors that are printed and stored: an echo of
        # the token (or of any credential) is masked there.
        self._scrubber = Scrubber([token], min_chars=4)
        self._owns_http = http is None
        pools = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        # Plain HTTP without httpcore, a pool per queue worker for TLS
        # (optimizer.runtime.rollouts.lanes), unless the environment names a proxy, which only
        # httpx's own transport applies.
        transport = None if env_proxies() else LaneTransport(pools)
        self._http = http or httpx.AsyncClient(
            timeout=self._timeout, limits=pools, transport=transport
        )
        # Rollouts of a client made here skip httpx's client layers (cookies, auth, redirects,
        # hooks: none of them used), which cost CPU on every rollout. Headers as it sent them.
        self._direct = transport if http is None else None
        if self._direct is not None:
            self._rollout_headers = {**self._http.headers, **self._rollout_headers}

    @property
    def urls(self) -> list[str]:
        """The configured URLs."""
        return [e.url for e in self._endpoints.all]

    @property
    def policy(self) -> RetryPolicy:
        """How hard this client tries (retries, timeouts, the rate-limit wait)."""
        return self._policy

    def join(self, share: int) -> None:
        """``share`` workers (a queue's) start sending: each URL's limit may grow by that much."""
        self._endpoints.join(share)

    def leave(self) -> None:
        """Undo every ``join`` of this client."""
        self._endpoints.leave()

    def limits(self) -> list[AdaptiveLimit]:
        """Each URL's adaptive limit (shared by every client of the process on that URL)."""
        return [e.limit for e in self._endpoints.all]

    def limits_view(self) -> list[dict[str, Any]]:
        """Each URL's limit, rollouts in flight and rate-limit wait (see ``AdaptiveLimit.view``)."""
        return self._endpoints.views()

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it, and the parse thread."""
        self.leave()
        self._bodies.close()
        if self._owns_http:
            await self._http.aclose()

    async def check_health(self) -> dict[str, str | None]:
        """Probe every URL; keep the healthy ones. Returns ``url -> problem or None``."""
        urls = self.urls
        problems = await asyncio.gather(*(self._probe(url) for url in urls))
        report = dict(zip(urls, problems, strict=True))
        healthy = {url for url in urls if report[url] is None}
        if not healthy:
            lines = "; ".join(f"{u}: {p}" for u, p in report.items())
            raise ContainerUnavailable(
                f"no container answers GET /health ({lines}). Start one with "
                "`gepa-runtime container MODULE --dataset PATH` or fix --container."
            )
        self._endpoints.keep(healthy)
        return report

    async def _probe(self, url: str) -> str | None:
        try:
            response = await self._http.get(f"{url}/health", headers=self._headers, timeout=10.0)
        except httpx.HTTPError as exc:
            return f"unreachable ({type(exc).__name__}: {exc})"
        if response.status_code in (401, 403):
            return (
                f"refused the token ({response.status_code}): pass --token or GEPA_CONTAINER_TOKEN"
            )
        if response.status_code != 200:
            return f"GET /health answered {response.status_code}"
        try:
            health = Health.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            return f"GET /health body is not gepa-container/1: {exc}"
        if health.protocol != PROTOCOL:
            return f"speaks {health.protocol!r}, this optimizer speaks {PROTOCOL!r}"
        return None

    async def program(self) -> Program:
        """``GET /program`` from every healthy URL; they must agree on the fingerprint."""
        urls = self.urls
        programs = [await self._get_program(url) for url in urls]
        first = programs[0]
        for url, other in zip(urls[1:], programs[1:], strict=True):
            if other.fingerprint != first.fingerprint or other.program_id != first.program_id:
                raise UserError(
                    f"containers disagree: {urls[0]} serves {first.program_id} "
                    f"({first.fingerprint[:12]}) but {url} serves {other.program_id} "
                    f"({other.fingerprint[:12]}); point every --container at the same program"
                )
        return first

    async def _get_program(self, url: str) -> Program:
        response = await self._http.get(f"{url}/program", headers=self._headers)
        if response.status_code in (401, 403):
            raise UserError(
                f"{url} refused the token ({response.status_code}): pass --token or GEPA_CONTAINER_TOKEN"
            )
        if response.status_code != 200:
            message = self._scrubber.text(_error_message(response.content))
            raise ProtocolViolation(
                f"GET {url}/program answered {response.status_code}: {message}",
                status=response.status_code,
            )
        try:
            return Program.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise ProtocolViolation(
                f"GET {url}/program is not a gepa-container/1 program: {exc}"
            ) from exc

    async def rollout(
        self,
        request: RolloutRequest | RolloutBody,
        *,
        reward_range: tuple[float, float] = DEFAULT_REWARD_RANGE,
        trace_cap_bytes: int | None = None,
        lane: int | None = None,
    ) -> tuple[RolloutOutcome | None, int]:
        """Run one rollout with retries. Returns ``(outcome, retries)``.

        ``request`` may come encoded (the queue encodes a candidate once for all its
        seeds: :class:`~optimizer.runtime.rollouts.bodies.CandidateBody`). ``reward_range`` is the
        program's; ``trace_cap_bytes`` (the workspace's) shrinks a bigger trace before it
        is kept; ``lane``, a queue worker's index, picks that worker's connection pool
        (:mod:`optimizer.runtime.rollouts.lanes`). Raises ``RolloutFailed`` after the last attempt,
        ``InvalidRollout`` for a 200 that cannot be scored, ``ProtocolViolation`` on another
        4xx, ``UserError`` when the token is refused.
        """
        body = request if isinstance(request, RolloutBody) else RolloutBody.of(request)
        with self._endpoints.wanted():
            return await self._rollout(body, reward_range, trace_cap_bytes, lane)

    async def _rollout(
        self,
        body: RolloutBody,
        reward_range: tuple[float, float],
        trace_cap_bytes: int | None,
        lane: int | None,
    ) -> tuple[RolloutOutcome, int]:
        tries = Tries(body.seed)
        while True:
            endpoint, ticket = await self._endpoints.acquire()
            tries.attempts += 1
            started = time.perf_counter()
            where = f"POST {endpoint.url}/rollout (seed {body.seed!r})"
            status: int | None = None
            waited: float | None = None  # the answer's Retry-After
            slot: Ticket | None = ticket
            try:
                async with contextlib.AsyncExitStack() as held:
                    status, content, complete, waited = await self._post(
                        endpoint, body.content, held, lane
                    )
                    # Answered: the container is free again, before the answer is parsed.
                    endpoint.limit.settle(ticket, status, time.monotonic(), waited)
                    slot = None
                    if status == 200:
                        parsed = await self._checked(
                            content, complete, where, tries.attempts, reward_range, trace_cap_bytes
                        )
                        return self._outcome(parsed, endpoint, tries, started, len(content))
            except httpx.HTTPError as exc:
                tries.reason, tries.last = self._fault(exc), _describe_error(exc)
                self._endpoints.unanswered(endpoint, refused=tries.reason == "connection")
                refused = isinstance(exc, httpx.ConnectError) and self._endpoints.another_up(
                    endpoint
                )
            else:
                tries.last = self._unanswered(endpoint.url, where, status, content)
                tries.reason = "status"
                refused = False
            finally:
                if slot is not None:  # no answer (or cancelled): the slot is freed all the same
                    endpoint.limit.settle(slot, None, time.monotonic())
            tries.status = status
            if not refused:  # refused: nothing reached it; another URL gets it at once
                since = endpoint.limit.limited_since
                await asyncio.sleep(
                    tries.wait(self._policy, self._rng, waited, since, endpoint.url)
                )

    def _outcome(
        self, parsed: ParsedRollout, endpoint: Endpoint, tries: Tries, started: float, size: int
    ) -> tuple[RolloutOutcome, int]:
        response, trace, truncated = parsed
        outcome = RolloutOutcome(
            response=response,
            attempts=tries.attempts,
            latency_ms=(time.perf_counter() - started) * 1000,
            url=endpoint.url,
            trace=trace,
            trace_truncated=truncated,
            body_bytes=size,
        )
        return outcome, tries.attempts - 1

    def _unanswered(self, url: str, where: str, status: int, content: bytes | bytearray) -> str:
        """A non-200 answer: a refused token and other 4xx raise; a retryable one is described."""
        message = self._scrubber.text(_error_message(content))
        if status in (401, 403):
            raise UserError(
                f"{url} refused the token ({status}): pass --token or GEPA_CONTAINER_TOKEN"
            )
        if status not in RETRY_STATUS:
            raise ProtocolViolation(f"{where} answered {status}: {message}", status=status)
        return f"HTTP {status}: {message}"

    async def _post(
        self, endpoint: Endpoint, body: bytes, held: contextlib.AsyncExitStack, lane: int | None
    ) -> tuple[int, bytearray, bool, float | None]:
        """``POST /rollout`` read as a stream: status, (capped) body, complete?, Retry-After.

        A big body takes one of the big-body slots into ``held`` (released once parsed).
        ``build_request`` + ``send`` is ``http.stream(...)`` without its context manager,
        with the URL and the timeout prepared once: CPU per rollout is the queue's budget.
        A client made here sends straight to its transport (see ``__init__``).
        """
        make = self._http.build_request if self._direct is None else httpx.Request
        request = make(
            "POST",
            endpoint.rollout_url,
            content=body,
            headers=self._rollout_headers,
            extensions=lane_extensions(self._rollout_extensions, lane),
        )
        if self._direct is None:
            response = await self._http.send(request, stream=True)
        else:
            response = await self._direct.handle_async_request(request)
            response.request = request
        try:
            status = response.status_code
            limit = self._max_response if status == 200 else ERROR_BODY_BYTES
            content, complete = await self._bodies.read(response, limit, held)
            return status, content, complete, None if status == 200 else retry_after(response)
        finally:
            await response.aclose()

    async def _checked(
        self,
        content: bytearray,
        complete: bool,
        where: str,
        attempt: int,
        reward_range: tuple[float, float],
        trace_cap: int | None,
    ) -> ParsedRollout:
        """Parse a 200 body; ``InvalidRollout`` (never retried) when it cannot be scored."""
        if not complete:
            raise InvalidRollout(
                f"{where} answered 200 with a body over {_mib(self._max_response)} MiB: refused "
                "unread; return a smaller trace, or raise --max-response-mib",
                attempts=attempt,
            )
        try:
            return await self._bodies.parse(content, reward_range, trace_cap)
        except InvalidRollout as exc:
            reason = self._scrubber.text(str(exc))
            raise InvalidRollout(f"{where} answered 200: {reason}", attempts=attempt) from None

    def _fault(self, exc: httpx.HTTPError) -> str:
        """``"timeout"`` when the container took longer than the rollout timeout, else
        ``"connection"`` (refused, dropped, or no connection within the connect timeout)."""
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return "timeout"
        return "connection"


def client_for(
    config: RunConfig, *, http: httpx.AsyncClient | None = None, **options: Any
) -> ContainerClient:
    """The client a run of ``config`` sends rollouts with: its containers, token, retry
    policy and response cap (``options``, e.g. ``max_connections``, pass through)."""
    token = config.container_token.get_secret_value() if config.container_token else None
    return ContainerClient(
        config.containers,
        token=token,
        http=http,
        rng=random.Random(config.seed + 7919),
        policy=RetryPolicy(
            max_retries=config.max_retries,
            base_delay_s=config.retry_base_delay_s,
            timeout_s=config.rollout_timeout_s,
            rate_limit_wait_s=config.rate_limit_wait_s,
        ),
        max_response_bytes=int(config.max_response_mib * 1024 * 1024),
        **options,
    )


def _describe_error(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:g}"
