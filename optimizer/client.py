"""HTTP client of gepa-container/1: health checks, the program, and rollouts with retries.

Every request goes through one ``httpx.AsyncClient`` (injectable, so tests can pass an
ASGI transport). Infrastructure faults (429, 503, other 5xx, 408, timeouts, dropped
connections) are retried with exponential backoff and full jitter, honouring
``Retry-After``; a rollout that still fails is ``RolloutFailed``, which the queue records as
an error and never scores. A 4xx is the caller's fault: ``ProtocolViolation`` (or
``UserError`` for a refused token), never retried.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx
from pydantic import ValidationError

from schemas import (
    PROTOCOL,
    ContainerUnavailable,
    Health,
    Program,
    ProtocolViolation,
    RolloutFailed,
    RolloutRequest,
    RolloutResponse,
    UserError,
)

__all__ = ["ContainerClient", "RetryPolicy", "RolloutOutcome"]

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts = 1 + ``max_retries``; delays double from ``base_delay_s``."""

    max_retries: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    timeout_s: float = 300.0

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return rng.uniform(cap / 2, cap)


@dataclass(frozen=True)
class RolloutOutcome:
    """A finished rollout: the response and how many attempts it took."""

    response: RolloutResponse
    attempts: int
    latency_ms: float
    url: str


@dataclass
class _Endpoint:
    url: str
    in_flight: int = 0
    failures: int = 0
    down_until: float = field(default=0.0)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        error = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(error, dict):
            return f"{error.get('type', 'error')}: {error.get('message', '')}"
        return str(error)
    except ValueError:
        return response.text[:500]


class ContainerClient:
    """Talks to one or many container URLs; spreads rollouts to the least busy healthy one."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        token: str | None = None,
        policy: RetryPolicy | None = None,
        rng: random.Random | None = None,
        http: httpx.AsyncClient | None = None,
        max_connections: int = 64,
    ) -> None:
        if not urls:
            raise UserError("no container URL: pass --container URL (or --module MODULE)")
        self._endpoints = [_Endpoint(u.rstrip("/")) for u in urls]
        self._policy = policy or RetryPolicy()
        self._rng = rng or random.Random(0)
        # Per-request headers: an injected client may be shared by runs with other tokens.
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(self._policy.timeout_s, connect=10.0),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    @property
    def urls(self) -> list[str]:
        """The configured URLs."""
        return [e.url for e in self._endpoints]

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def check_health(self) -> dict[str, str | None]:
        """Probe every URL; keep the healthy ones. Returns ``url -> problem or None``."""
        problems = await asyncio.gather(*(self._probe(e.url) for e in self._endpoints))
        report = {e.url: p for e, p in zip(self._endpoints, problems, strict=True)}
        healthy = [e for e in self._endpoints if report[e.url] is None]
        if not healthy:
            lines = "; ".join(f"{u}: {p}" for u, p in report.items())
            raise ContainerUnavailable(
                f"no container answers GET /health ({lines}). Start one with "
                "`gepa-runtime container MODULE --dataset PATH` or fix --container."
            )
        self._endpoints = healthy
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
        programs = [await self._get_program(e.url) for e in self._endpoints]
        first = programs[0]
        for endpoint, other in zip(self._endpoints[1:], programs[1:], strict=True):
            if other.fingerprint != first.fingerprint or other.program_id != first.program_id:
                raise UserError(
                    f"containers disagree: {self._endpoints[0].url} serves {first.program_id} "
                    f"({first.fingerprint[:12]}) but {endpoint.url} serves {other.program_id} "
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
            raise ProtocolViolation(
                f"GET {url}/program answered {response.status_code}: {_error_message(response)}",
                status=response.status_code,
            )
        try:
            return Program.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise ProtocolViolation(
                f"GET {url}/program is not a gepa-container/1 program: {exc}"
            ) from exc

    def _pick(self) -> _Endpoint:
        now = time.monotonic()
        up = [e for e in self._endpoints if e.down_until <= now] or self._endpoints
        return min(up, key=lambda e: (e.in_flight, e.failures))

    async def rollout(self, request: RolloutRequest) -> tuple[RolloutOutcome | None, int]:
        """Run one rollout with retries. Returns ``(outcome, retries)``.

        Raises ``RolloutFailed`` after the last attempt, ``ProtocolViolation`` on a 4xx,
        ``UserError`` when the token is refused.
        """
        body = request.model_dump(mode="json")
        attempts = self._policy.max_retries + 1
        last = "no attempt"
        status: int | None = None
        for attempt in range(1, attempts + 1):
            endpoint = self._pick()
            endpoint.in_flight += 1
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                response = await self._http.post(
                    f"{endpoint.url}/rollout", json=body, headers=self._headers
                )
            except httpx.HTTPError as exc:
                last, status = f"{type(exc).__name__}: {exc}".rstrip(": "), None
                endpoint.failures += 1
                endpoint.down_until = time.monotonic() + 1.0
            else:
                status = response.status_code
                if status == 200:
                    endpoint.failures = 0
                    return RolloutOutcome(
                        response=self._parse(response, endpoint.url),
                        attempts=attempt,
                        latency_ms=(time.perf_counter() - started) * 1000,
                        url=endpoint.url,
                    ), attempt - 1
                if status in (401, 403):
                    raise UserError(
                        f"{endpoint.url} refused the token ({status}): pass --token or GEPA_CONTAINER_TOKEN"
                    )
                if status not in RETRY_STATUS:
                    raise ProtocolViolation(
                        f"POST {endpoint.url}/rollout (seed {request.seed!r}) answered {status}: "
                        f"{_error_message(response)}",
                        status=status,
                    )
                last = f"HTTP {status}: {_error_message(response)}"
                retry_after = _retry_after(response)
            finally:
                endpoint.in_flight -= 1
            if attempt < attempts:
                await asyncio.sleep(self._policy.delay(attempt, self._rng, retry_after))
        raise RolloutFailed(
            f"rollout of seed {request.seed!r} failed after {attempts} attempts: {last}",
            attempts=attempts,
            status=status,
        )

    @staticmethod
    def _parse(response: httpx.Response, url: str) -> RolloutResponse:
        try:
            return RolloutResponse.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise ProtocolViolation(
                f"POST {url}/rollout answered 200 with a body that is not a rollout: {exc}"
            ) from exc
