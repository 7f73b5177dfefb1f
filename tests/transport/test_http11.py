"""The plain-HTTP transport (transport/http11.py) against real servers on 127.0.0.1.

A uvicorn server for what real containers answer (lengths, chunked streams, gzip, HEAD, 204,
``Connection: close``), and a scripted asyncio server for what they should not (a dropped
connection, a short body, a broken status line, silence) and for what only the bytes show.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from optimizer.testing import free_port, thread_server
from tests.fakes.asgi import read_body
from tests.fakes.servers import ROOT
from transport.http11 import PlainHTTPTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class App:
    """An ASGI app that answers as ``path`` says and notes each request's client port."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        path = scope["path"]
        self.seen.append((path, scope["client"][1], body))
        headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
        if path == "/stream":  # no length: uvicorn sends it chunked
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for i in range(3):
                await send(
                    {"type": "http.response.body", "body": b"part%d;" % i, "more_body": True}
                )
            await send({"type": "http.response.body", "body": b""})
            return
        status, content = 200, json.dumps({"path": path, "got": len(body)}).encode()
        if path == "/big":
            content = b"x" * (2 * 1024 * 1024)
        elif path == "/gzip":
            content = gzip.compress(b'{"zipped": true}')
            headers.append((b"content-encoding", b"gzip"))
        elif path == "/empty":
            status, content = 204, b""
        elif path == "/close":
            headers.append((b"connection", b"close"))
        headers.append((b"content-length", str(len(content)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


@pytest.fixture
def app() -> Iterator[tuple[str, App]]:
    recorder = App()
    with thread_server(recorder) as url:
        yield url, recorder


def _client(**limits: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=PlainHTTPTransport(limits=httpx.Limits(**limits)), timeout=5)


def _ports(app: App) -> list[int]:
    return [port for _, port, _ in app.seen]


async def test_answers_of_every_framing_over_one_kept_alive_connection(
    app: tuple[str, App],
) -> None:
    url, recorder = app
    async with _client() as http:
        posted = await http.post(f"{url}/json", content=b"a" * 1000)
        streamed = await http.get(f"{url}/stream")
        zipped = await http.get(f"{url}/gzip")
        empty = await http.get(f"{url}/empty")
        head = await http.head(f"{url}/json")
        big = await http.get(f"{url}/big")

        async def chunks() -> AsyncIterator[bytes]:
            for piece in (b"one,", b"two,", b"three"):
                yield piece

        sent_chunked = await http.post(f"{url}/json", content=chunks())
    assert posted.json() == {"path": "/json", "got": 1000}
    assert (
        streamed.text == "part0;part1;part2;" and streamed.headers["transfer-encoding"] == "chunked"
    )
    assert zipped.json() == {"zipped": True}  # httpx decodes, as over its own transport
    assert empty.status_code == 204 and empty.content == b""
    assert (
        head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    )
    assert len(big.content) == 2 * 1024 * 1024
    assert sent_chunked.json()["got"] == len(b"one,two,three")
    assert recorder.seen[-1][2] == b"one,two,three"
    assert len(set(_ports(recorder))) == 1  # every answer read to its end: the connection kept


async def test_a_connection_is_not_reused_after_close_or_an_unread_body(
    app: tuple[str, App],
) -> None:
    url, recorder = app
    async with _client() as http:
        await http.get(f"{url}/close")
        await http.get(f"{url}/json")  # the server closed the last one: a new connection
        async with http.stream("GET", f"{url}/big") as response:
            async for _ in response.aiter_raw():
                break  # the rest of the body is never read: the connection is dropped
        await http.get(f"{url}/json")
        await http.get(f"{url}/json")
    first, second, big, third, fourth = _ports(recorder)
    assert len({first, second, third}) == 3 and big == second and fourth == third


async def test_an_idle_connection_past_its_expiry_is_not_reused(app: tuple[str, App]) -> None:
    url, recorder = app
    async with _client(keepalive_expiry=0.2) as http:
        await http.get(f"{url}/json")
        await http.get(f"{url}/json")
        await asyncio.sleep(0.3)
        await http.get(f"{url}/json")
    first, second, third = _ports(recorder)
    assert first == second != third


async def test_concurrent_requests_take_a_connection_each_and_keep_them(
    app: tuple[str, App],
) -> None:
    url, recorder = app
    async with _client() as http:
        for _ in range(3):
            answers = await asyncio.gather(*(http.get(f"{url}/json") for _ in range(4)))
            assert all(a.status_code == 200 for a in answers)
    assert len(recorder.seen) == 12 and len(set(_ports(recorder))) <= 4


# scripted servers


@contextlib.asynccontextmanager
async def _serve(handler: Handler) -> AsyncIterator[str]:
    """A scripted server's URL; on exit every connection it accepted is closed."""
    writers: list[asyncio.StreamWriter] = []

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        await server.wait_closed()


async def _request_of(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


def _scripted(*answers: bytes, then_close: bool = True) -> tuple[Handler, list[bytes]]:
    """A handler that answers each request with the next of ``answers`` (raw bytes)."""
    requests: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            requests.append(await _request_of(reader))
            writer.write(answer)
            await writer.drain()
        if not then_close:
            await reader.read()

    return handler, requests


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", b"until the end"),
        (b"HTTP/1.0 200 OK\r\n\r\nold server", b"old server"),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n",
            b"abcde",
        ),
    ],
)
async def test_other_framings_are_read(answer: bytes, body: bytes) -> None:
    handler, requests = _scripted(answer)
    async with _serve(handler) as url, _client() as http:
        response = await http.post(
            f"{url}/rollout?x=1", content=b'{"seed": "s"}', headers={"X-A": "b"}
        )
    assert response.status_code == 200 and response.content == body
    sent = requests[0]
    assert sent.startswith(b"POST /rollout?x=1 HTTP/1.1\r\n") and sent.endswith(
        b'\r\n\r\n{"seed": "s"}'
    )
    assert b"\r\nx-a: b\r\n" in sent.lower() and b"\r\ncontent-length: 13\r\n" in sent.lower()


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (b"", httpx.RemoteProtocolError, "without sending a response"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            httpx.RemoteProtocolError,
            "expected 10",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            httpx.RemoteProtocolError,
            "complete",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            httpx.RemoteProtocolError,
            "chunk size",
        ),
        (b"HTTP/1.1 OK\r\n\r\n", httpx.RemoteProtocolError, "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", httpx.RemoteProtocolError, "header line"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
            httpx.RemoteProtocolError,
            "Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Len", httpx.RemoteProtocolError, "complete"),
    ],
)
async def test_broken_answers_are_protocol_errors(answer: bytes, error: type, message: str) -> None:
    handler, _ = _scripted(answer)
    async with _serve(handler) as url, _client() as http:
        with pytest.raises(error, match=message):
            await http.post(f"{url}/rollout", content=b"{}")


async def test_a_kept_connection_the_server_closed_is_replaced() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer.get_extra_info("peername")[1])
        await _request_of(reader)
        writer.write(ok)  # keep-alive by HTTP/1.1, then closed anyway
        await writer.drain()
        writer.close()

    async with _serve(handler) as url, _client() as http:
        assert (await http.get(f"{url}/a")).text == "ok"
        await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        assert (await http.get(f"{url}/b")).text == "ok"
    assert len(set(connections)) == 2


async def test_timeouts_and_refusals_are_httpx_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with (
        _serve(silent) as url,
        httpx.AsyncClient(transport=PlainHTTPTransport(), timeout=0.2) as http,
    ):
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"{url}/rollout", content=b"{}")
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{free_port()}/health")


async def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    handler, requests = _scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    async with _serve(handler) as url, _client() as http:
        with pytest.raises(httpx.LocalProtocolError):
            await http.get(f"{url}/x", headers={"Authorization": "Bearer a\r\nX-Evil: 1"})
    assert requests == []


async def test_other_schemes_go_to_the_fallback_transport() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, text="tls")

    transport = PlainHTTPTransport(fallback=lambda: httpx.MockTransport(answer))
    async with httpx.AsyncClient(transport=transport) as http:
        assert (await http.get("https://tls.test/health")).text == "tls"
    assert seen == ["https://tls.test/health"]


_CHAT = """
import asyncio, sys
from transport.chat_http import HttpChatCompletions

async def main() -> None:
    chat = HttpChatCompletions(base_url=sys.argv[1], api_key=None, timeout=10, max_retries=0)
    answer = await chat.create({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    await chat.aclose()
    print(answer["choices"][0]["message"]["content"], "httpcore" in sys.modules)

asyncio.run(main())
"""


def test_the_chat_client_reaches_a_local_model_without_loading_httpcore() -> None:
    """A reflection model on this machine is reached over this transport, as a plain-HTTP
    container is: a fresh process that asks it for a completion never imports httpcore."""
    seen: list[str] = []

    async def model(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(json.loads(await read_body(receive))["messages"][0]["content"])
        content = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hello"}}]})
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content.encode()})

    with thread_server(model) as url:
        done = subprocess.run(
            [sys.executable, "-c", _CHAT, f"{url}/v1"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hello", "False"]
    assert seen == ["hi"]
