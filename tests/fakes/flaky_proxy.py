"""A TCP proxy on 127.0.0.1 that makes a healthy container flaky.

Each connection carries one HTTP request. With the configured probabilities the proxy
answers 429 (``Retry-After: 0``) or 503 itself, drops the connection before forwarding, or
forwards and then drops the answer (the container did the work; the caller never hears).
Otherwise it relays the request with ``Connection: close``. Seeded, bounded, loopback only.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FlakyProxy:
    """Run with ``with FlakyProxy(upstream_port, ...) as url:``."""

    upstream_port: int
    p_429: float = 0.15
    p_503: float = 0.1
    p_drop: float = 0.1
    p_drop_after: float = 0.05
    seed: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0

    async def _read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
        head = b"\r\n".join(lines).rstrip(b"\r\n") + b"\r\nConnection: close\r\n\r\n"
        return head + body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await self._read_request(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        is_rollout = request.startswith(b"POST /rollout")
        roll = self._rng.random() if is_rollout else 1.0
        try:
            if roll < self.p_429:
                self.faults["429"] += 1
                writer.write(
                    b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            elif roll < self.p_429 + self.p_503:
                self.faults["503"] += 1
                writer.write(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            elif roll < self.p_429 + self.p_503 + self.p_drop:
                self.faults["drop"] += 1
            else:
                up_reader, up_writer = await asyncio.open_connection(
                    "127.0.0.1", self.upstream_port
                )
                up_writer.write(request)
                await up_writer.drain()
                answer = await up_reader.read()
                up_writer.close()
                if roll < self.p_429 + self.p_503 + self.p_drop + self.p_drop_after:
                    self.faults["drop_after"] += 1
                else:
                    writer.write(answer)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._server = server
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
