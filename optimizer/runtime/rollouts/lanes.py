"""The container client's transport: plain HTTP by :mod:`transport.http11`, TLS by httpcore pools.

``http://`` containers (the usual: on this machine, in a cluster, behind a gateway that
terminates TLS) are reached through one :class:`transport.http11.PlainHTTPTransport`: a
keep-alive connection per request in flight, no pool to scan: less CPU per rollout than
httpx's own transport.

``https://`` ones get httpx's transport, one pool per rollout worker ("lane"): httpcore 1.0
walks every connection of a pool on each request and on each response close, and asks every
idle one whether the server closed it: a ``getpeername`` and a ``poll`` system call per
connection (encode/httpcore#928). With ``--concurrency 16`` sharing one pool of 16
connections, that scan was over a third of the client's CPU per rollout. A worker has one
request in flight at a time, so a pool of its own holds one connection per container URL
and its scan is short. ``LaneTransport`` routes a request to the pool of the lane named in
its ``extensions`` (:func:`lane_extensions`); requests without a lane (health checks, ``GET
/program``) share one pool. Every pool has the client's limits, so a lane never waits for
a connection another lane holds. The TLS context and the pools are made on first use.
"""

from __future__ import annotations

import ssl
import urllib.request
from typing import Any

import httpx

from transport.http11 import PlainHTTPTransport

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
    """Plain HTTP through one :class:`PlainHTTPTransport`; TLS through a pool per lane."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._plain = PlainHTTPTransport(limits=limits, fallback=self._pool)
        self._tls: ssl.SSLContext | None = None  # one for all pools: loading CAs takes ms
        self._shared: httpx.AsyncHTTPTransport | None = None
        self._lanes: dict[int, httpx.AsyncHTTPTransport] = {}

    def _pool(self) -> httpx.AsyncHTTPTransport:
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
        return httpx.AsyncHTTPTransport(verify=self._tls, limits=self._limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` as plain HTTP, or through its lane's pool (or the shared one)."""
        if request.url.scheme == "http":
            return await self._plain.handle_async_request(request)
        lane = request.extensions.get(LANE)
        if lane is None:
            if self._shared is None:
                self._shared = self._pool()
            return await self._shared.handle_async_request(request)
        pool = self._lanes.get(lane)
        if pool is None:
            pool = self._lanes[lane] = self._pool()
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool."""
        pools = [p for p in (self._shared, *self._lanes.values()) if p is not None]
        self._shared, self._lanes = None, {}
        await self._plain.aclose()
        for pool in pools:
            await pool.aclose()
