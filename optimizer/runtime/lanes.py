"""One connection pool per rollout worker ("lane"), because httpcore scans a pool per request.

httpcore 1.0 walks every connection of a pool on each request and on each response close,
and asks every idle one whether the server closed it: a ``getpeername`` and a ``poll``
system call per connection (encode/httpcore#928). With ``--concurrency 16`` sharing one
pool of 16 connections, most of them idle while their workers parse and store answers,
that scan was over a third of the client's CPU per rollout against a no-op container, and
it grew with the work the queue did between requests.

A worker has one request in flight at a time, so a pool of its own holds one connection
per container URL and its scan is short. ``LaneTransport`` routes a request to the pool of
the lane named in its ``extensions`` (:func:`lane_extensions`); requests without a lane
(health checks, ``GET /program``) share one pool. Every pool has the client's limits, so a
lane never waits for a connection another lane holds.

Containers reached over plain ``http://`` need no TLS: then the pools get a context that
trusts no certificate (a TLS handshake through them fails, never goes unverified) instead of
one with the CA bundle loaded, about 20 ms of CPU per process.
"""

from __future__ import annotations

import ssl
import urllib.request
from typing import Any

import httpx

__all__ = ["LANE", "LaneTransport", "env_proxies", "lane_extensions"]

LANE = "gepa_lane"  # the request extension that names the lane


def lane_extensions(extensions: dict[str, Any], lane: int | None) -> dict[str, Any]:
    """``extensions`` for a request of ``lane`` (unchanged for no lane)."""
    return extensions if lane is None else {**extensions, LANE: lane}


def env_proxies() -> bool:
    """Whether the environment names an HTTP proxy (``HTTP_PROXY``, ``ALL_PROXY``, ...).

    httpx applies those only to a client it builds its own transport for: a client with
    proxies keeps httpx's transport (and one pool).
    """
    return any(scheme != "no" for scheme in urllib.request.getproxies())


class LaneTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, one instance (one pool) per lane, made on first use."""

    def __init__(self, limits: httpx.Limits, *, tls: bool = True) -> None:
        self._limits = limits
        # One TLS context for all pools: loading the CA bundle takes milliseconds each.
        self._tls = httpx.create_ssl_context() if tls else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._shared = self._pool()
        self._lanes: dict[int, httpx.AsyncHTTPTransport] = {}

    def _pool(self) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(verify=self._tls, limits=self._limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through its lane's pool (or the shared one)."""
        lane = request.extensions.get(LANE)
        if lane is None:
            return await self._shared.handle_async_request(request)
        pool = self._lanes.get(lane)
        if pool is None:
            pool = self._lanes[lane] = self._pool()
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool."""
        pools, self._lanes = [self._shared, *self._lanes.values()], {}
        for pool in pools:
            await pool.aclose()
