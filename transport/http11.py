"""Plain ``http://`` as an httpx transport: HTTP/1.1 over asyncio, keep-alive, nothing more.

It costs less CPU per request than httpx's own transport (httpcore over anyio, h11's parser),
the same httpx client on top (``bench/cpu_profile.py --http`` measures both; the figures are
on the benchmarks page). The container client sends its rollouts through it
(:mod:`optimizer.runtime.rollouts.lanes`, plain HTTP without a proxy), and the chat client
(:mod:`transport.chat_http`: the reflection model, the container's student) reaches a model on this
machine through it, so a run never loads httpcore; anything but ``http://`` goes to the ``fallback``
transport, httpx's own, made on first use. ``respx`` fakes httpx's transport, not this one: tests
that fake a local model with it give the chat client httpx's (``tests/proposer/conftest.py``).

What it speaks: a request with a ``Content-Length`` body or a streamed one (sent chunked
when the request says so); answers framed by ``Content-Length``, ``chunked`` or the end of
the connection, no body for ``HEAD``, 1xx, 204 and 304; 1xx interim answers skipped. Bodies
stream: at most ``_HIGH_WATER`` bytes are buffered before reading pauses, so a caller that
stops reading a big answer stops the reading. A connection goes back to the idle list only
when its answer was read to the end and neither side said ``Connection: close``; an idle
one is dropped when the server closed it or after ``keepalive_expiry`` seconds. Timeouts
are the request's (``connect``, ``read`` per read, ``write``); failures are httpx's
exceptions, as its transport raises them (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``WriteTimeout``, ``ReadError``, ``WriteError``, ``RemoteProtocolError``,
``LocalProtocolError``). The callers bound their concurrency, so connections are not capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

__all__ = ["PlainHTTPTransport"]

_HIGH_WATER = 256 * 1024  # bytes buffered before reading pauses
_READ_CHUNK = 64 * 1024
_MAX_HEAD = 64 * 1024  # status line and headers of an answer
_ILLEGAL = re.compile(rb"[\r\n\0]")
_NO_BODY_STATUS = frozenset({204, 304})


class PlainHTTPTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio for ``http://`` URLs (see the module docstring)."""

    def __init__(
        self,
        *,
        limits: httpx.Limits | None = None,
        fallback: Callable[[], httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        limits = limits or httpx.Limits()
        self._max_idle = limits.max_keepalive_connections
        self._expiry = math.inf if limits.keepalive_expiry is None else limits.keepalive_expiry
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._make_fallback = fallback or httpx.AsyncHTTPTransport
        self._fallback: httpx.AsyncBaseTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its answer with the body still to be read."""
        if request.url.scheme != "http":
            if self._fallback is None:
                self._fallback = self._make_fallback()
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        head = _head(request)
        origin = (request.url.host, request.url.port or 80)
        conn = self._reuse(origin) or await _connect(origin, timeouts.get("connect"), request)
        try:
            # As httpcore: a server may answer (413, say) and close before reading it all.
            with contextlib.suppress(httpx.WriteError):
                await conn.send(head, request, timeouts.get("write"))
            status, reason, version, headers = await _answer_head(conn, request, timeouts)
            body = _Body(self, origin, conn, request, timeouts.get("read"))
            body.frame(request.method, status, version, headers)
        except BaseException:
            conn.close()
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=body,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        """Close the idle connections (and the fallback transport, if one was made)."""
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
        if self._fallback is not None:
            await self._fallback.aclose()

    def _reuse(self, origin: tuple[str, int]) -> _Connection | None:
        conns = self._idle.get(origin)
        now = asyncio.get_running_loop().time()
        while conns:
            conn = conns.pop()
            if conn.reusable() and now - conn.idle_since < self._expiry:
                return conn
            conn.close()
        return None

    def release(self, origin: tuple[str, int], conn: _Connection) -> None:
        """Keep ``conn`` for the next request to ``origin``, or close it."""
        conns = self._idle.setdefault(origin, [])
        full = self._max_idle is not None and len(conns) >= self._max_idle
        if full or not conn.reusable():
            conn.close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        conns.append(conn)


class _Connection(asyncio.Protocol):
    """One TCP connection: what arrived, whether it ended, and one reader waiting for more."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.ended = False  # the server closed its side (or the connection is lost)
        self.error: Exception | None = None
        self.idle_since = 0.0
        self.transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writing_paused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        self._writing_paused = False
        self._wake()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake()

    # for the transport

    def reusable(self) -> bool:
        """Idle and sound: open on both sides and nothing unasked for in the buffer."""
        return not self.ended and not self.buffer and self.transport is not None

    def close(self) -> None:
        """Close the connection (now, without waiting for unsent bytes)."""
        if self.transport is not None:
            self.transport.abort()

    async def send(self, data: bytes, request: httpx.Request, timeout: float | None) -> None:
        """Write ``data`` (the head and a body known in full) and the rest of the body."""
        transport = self._transport(request, httpx.WriteError)
        transport.write(data)
        if isinstance(request.stream, httpx.ByteStream):  # sent whole with the head
            await self._drained(request, timeout)
            return
        chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
        async for piece in request.stream:  # type: ignore[union-attr]
            if piece:
                transport.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                await self._drained(request, timeout)
        if chunked:
            transport.write(b"0\r\n\r\n")
        await self._drained(request, timeout)

    async def read(self, request: httpx.Request, timeout: float | None, limit: int) -> bytes:
        """Up to ``limit`` bytes, waiting for some; ``b""`` once the server closed its side."""
        while not self.buffer:
            if self.ended:
                if self.error is not None:
                    raise httpx.ReadError(str(self.error) or "connection lost", request=request)
                return b""
            await self._wait(request, timeout, httpx.ReadTimeout)
        data = bytes(self.buffer[:limit])
        del self.buffer[:limit]
        return data

    async def read_head(self, request: httpx.Request, timeout: float | None) -> bytes | None:
        """An answer's status line and headers; ``None`` when the server closed the
        connection without sending a byte."""
        return await self._until(b"\r\n\r\n", request, timeout, first=True)

    async def read_line(self, request: httpx.Request, timeout: float | None) -> bytes:
        """One CRLF-terminated line of a chunked body (without its CRLF)."""
        line = await self._until(b"\r\n", request, timeout, first=False)
        assert line is not None  # only a first read may find the connection closed
        return line

    async def _until(
        self, marker: bytes, request: httpx.Request, timeout: float | None, *, first: bool
    ) -> bytes | None:
        start = 0
        while (at := self.buffer.find(marker, start)) < 0:
            if len(self.buffer) > _MAX_HEAD:
                raise httpx.RemoteProtocolError(
                    "answer head or chunk line too long", request=request
                )
            if self.ended:
                if first and not self.buffer and self.error is None:
                    return None
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body",
                    request=request,
                )
            start = max(0, len(self.buffer) - len(marker) + 1)
            await self._wait(request, timeout, httpx.ReadTimeout)
        line = bytes(self.buffer[:at])
        del self.buffer[: at + len(marker)]
        return line

    # internals

    def _transport(
        self, request: httpx.Request, error: type[httpx.TransportError]
    ) -> asyncio.Transport:
        if self.transport is None or self.transport.is_closing() or self.ended:
            raise error("connection closed", request=request)
        return self.transport

    async def _drained(self, request: httpx.Request, timeout: float | None) -> None:
        while self._writing_paused:
            await self._wait(request, timeout, httpx.WriteTimeout)
        if self.ended and self.error is not None:
            raise httpx.WriteError(str(self.error) or "connection lost", request=request)

    async def _wait(
        self, request: httpx.Request, timeout: float | None, expired: type[httpx.TimeoutException]
    ) -> None:
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        except TimeoutError:
            raise expired(f"no answer within {timeout:g}s", request=request) from None
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def _connect(
    origin: tuple[str, int], timeout: float | None, request: httpx.Request
) -> _Connection:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            _, conn = await loop.create_connection(_Connection, *origin)
    except TimeoutError:
        raise httpx.ConnectTimeout(f"no connection within {timeout:g}s", request=request) from None
    except OSError as exc:
        raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
    return conn


def _head(request: httpx.Request) -> bytes:
    """The request line and headers, and the body when it is known in full."""
    target = request.url.raw_path
    method = request.method.encode("ascii")
    lines = [b"%s %s HTTP/1.1" % (method, target)]
    for name, value in request.headers.raw:
        if _ILLEGAL.search(name) or _ILLEGAL.search(value) or b":" in name:
            raise httpx.LocalProtocolError(f"illegal header {name!r}", request=request)
        lines.append(b"%s: %s" % (name, value))
    if _ILLEGAL.search(target) or b" " in target or b" " in method:
        raise httpx.LocalProtocolError("illegal request line", request=request)
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    if isinstance(request.stream, httpx.ByteStream):
        return head + request.content
    return head


async def _answer_head(
    conn: _Connection, request: httpx.Request, timeouts: dict[str, Any]
) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    """The first final answer's status, reason, version and headers (1xx skipped)."""
    while True:
        head = await conn.read_head(request, timeouts.get("read"))
        if head is None:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        status_line, *lines = head.split(b"\r\n")
        version, _, rest = status_line.partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise httpx.RemoteProtocolError(
                f"malformed status line {status_line[:80]!r}", request=request
            )
        status = int(code)
        if status == 101:
            raise httpx.RemoteProtocolError("switching protocols is not supported", request=request)
        if status >= 200:
            return status, reason.strip(), version, _headers(lines, request)


def _headers(lines: list[bytes], request: httpx.Request) -> list[tuple[bytes, bytes]]:
    headers = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}", request=request)
        headers.append((name, value.strip(b" \t")))
    return headers


class _Body(httpx.AsyncByteStream):
    """An answer's body as it arrives; its connection goes back for reuse once read to the end."""

    def __init__(
        self,
        owner: PlainHTTPTransport,
        origin: tuple[str, int],
        conn: _Connection,
        request: httpx.Request,
        timeout: float | None,
    ) -> None:
        self._owner = owner
        self._origin = origin
        self._conn: _Connection | None = conn
        self._request = request
        self._timeout = timeout
        self._kind = "none"  # none | length | chunked | close
        self._length = 0
        self._keep = False
        self._done = False

    def frame(
        self, method: str, status: int, version: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        """How the body ends (RFC 9112 6.3) and whether the connection stays open after it."""
        values: dict[bytes, list[bytes]] = {}
        for name, value in headers:
            values.setdefault(name.lower(), []).append(value)
        told = b",".join(values.get(b"connection", [])).lower()
        asked = self._request.headers.get("connection", "").lower()
        self._keep = version == b"HTTP/1.1" and b"close" not in told and "close" not in asked
        if method == "HEAD" or status in _NO_BODY_STATUS:
            self._kind = "none"
        elif b"transfer-encoding" in values:
            codings = b",".join(values[b"transfer-encoding"]).lower().split(b",")
            self._kind = "chunked" if codings[-1].strip() == b"chunked" else "close"
        elif b"content-length" in values:
            sizes = {v.strip() for v in b",".join(values[b"content-length"]).split(b",")}
            size = sizes.pop() if len(sizes) == 1 else b""
            if not size.isdigit():
                raise httpx.RemoteProtocolError("malformed Content-Length", request=self._request)
            self._kind, self._length = "length", int(size)
        else:
            self._kind = "close"
        if self._kind == "close":
            self._keep = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None or self._done:
            return
        if self._kind == "length":
            remaining = self._length
            while remaining:
                data = await conn.read(self._request, self._timeout, min(remaining, _READ_CHUNK))
                if not data:
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body: "
                        f"received {self._length - remaining} bytes, expected {self._length}",
                        request=self._request,
                    )
                remaining -= len(data)
                yield data
        elif self._kind == "chunked":
            async for data in self._chunks(conn):
                yield data
        elif self._kind == "close":
            while data := await conn.read(self._request, self._timeout, _READ_CHUNK):
                yield data
        self._done = True

    async def _chunks(self, conn: _Connection) -> AsyncIterator[bytes]:
        while True:
            line = await conn.read_line(self._request, self._timeout)
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(
                    f"malformed chunk size {line[:40]!r}", request=self._request
                ) from None
            if size == 0:
                while await conn.read_line(self._request, self._timeout):
                    pass  # trailer fields, up to the empty line
                return
            while size:
                data = await conn.read(self._request, self._timeout, min(size, _READ_CHUNK))
                if not data:
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body",
                        request=self._request,
                    )
                size -= len(data)
                yield data
            if await conn.read_line(self._request, self._timeout):
                raise httpx.RemoteProtocolError("malformed chunk end", request=self._request)

    async def aclose(self) -> None:
        """Hand the connection back when the body was read to the end, else close it."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._kind == "none":
            self._done = True
        if self._done and self._keep:
            self._owner.release(self._origin, conn)
        else:
            conn.close()
