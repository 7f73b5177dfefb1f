"""A container that breaks the protocol on chosen seeds, as a Starlette app for real servers.

Every seed not in ``answers`` is answered by a :class:`~tests.fakes.scripted.RuleContainer`
(``- <label>`` in the prompt scores 1). A seed in ``answers`` gets that answer instead:

- ``bytes``: a 200 with exactly that body (``b'{"reward": NaN}'``, a string reward, ...);
- ``Stream(total, chunk)``: a 200 streamed in chunks without ``Content-Length``;
- ``Slow(seconds)``: a valid answer after ``seconds`` (for timeouts).

``calls`` counts the rollouts served per seed, so tests see whether a bad answer was retried.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.scripted import RuleContainer


@dataclass(frozen=True)
class Stream:
    """A 200 body of ``total`` bytes of trace text sent ``chunk`` bytes at a time."""

    total: int
    chunk: int = 64 * 1024


@dataclass(frozen=True)
class Slow:
    """A valid answer that takes ``seconds``."""

    seconds: float


Answer = bytes | Stream | Slow


@dataclass
class HostileContainer:
    """The app's state: the rule container behind it, the bad answers, what was served."""

    rules: RuleContainer
    answers: dict[str, Answer] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)

    def app(self) -> Starlette:
        """The ASGI app (serve it with ``optimizer.testing.thread_server``)."""

        async def forward(request: Request) -> Response:
            body = await request.body()
            seed = json.loads(body)["seed"] if request.method == "POST" else None
            if seed is not None:
                self.calls[seed] += 1
            answer = self.answers.get(seed) if seed is not None else None
            if isinstance(answer, bytes):
                return Response(answer, media_type="application/json")
            if isinstance(answer, Stream):
                return StreamingResponse(_stream(answer), media_type="application/json")
            if isinstance(answer, Slow):
                await asyncio.sleep(answer.seconds)
            ruled = self.rules(httpx.Request(request.method, str(request.url), content=body))
            return Response(
                ruled.content, status_code=ruled.status_code, media_type="application/json"
            )

        return Starlette(
            routes=[
                Route("/health", forward),
                Route("/program", forward),
                Route("/rollout", forward, methods=["POST"]),
            ]
        )


async def _stream(answer: Stream) -> AsyncIterator[bytes]:
    yield b'{"reward": 1.0, "trace": {"messages": [{"role": "tool", "content": "'
    filler = b"x" * answer.chunk
    for _ in range(answer.total // answer.chunk):
        yield filler
    yield b'"}]}}'
