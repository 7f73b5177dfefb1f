"""The container of the chaos bench: deterministic scores, injected faults, its own call log.

Run as a process (``python bench/chaos_container.py --port P --log FILE [options]``); the
bench (``bench/chaos.py``) audits a run against what this process logged and what
:func:`expected_reward` says, never against the optimizer's own counters.

- **Deterministic scores**: seed ``<label>-<i>`` scores 1.0 when the candidate's
  ``system_prompt`` names ``<label>`` as a word, else 0.0 (feedback ``expected <label>``, which
  the scripted reflection model of ``optimizer/testing/reflection.py`` learns from).
- **Faults** (``--faults``): the first and second request of a (candidate, seed) may be
  answered by a fault chosen from a hash of (candidate, seed, attempt): 429 with
  ``Retry-After: 0``, 503 with ``Retry-After: 1``, 500, a connection dropped in the middle of
  the body, or an answer slower than ``--slow`` seconds (past the client's timeout). From the
  third request on it always answers, so a client that retries gets every score.
- **Hostile answers** (``--hostile``): six seeds always answer a 200 that must not be scored
  (:data:`HOSTILE`): a NaN, 7.0, ``"0.9"`` or ``true`` reward, a negative cost, a body bigger
  than the bench's ``--max-response-mib``.
- **Echo** (``--echo-token``): every answer quotes the bearer token it was sent in its
  feedback and trace, as a careless container would.
- ``--token T`` makes the container require ``Authorization: Bearer T``; ``--program other``
  serves another program (id and components), for resume checks.

Each request to ``/rollout`` appends one JSON line to ``--log`` when it arrives:
``{"program", "cand" (content hash), "seed", "fault" (kind or null)}``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schemas import content_hash  # noqa: E402

LABELS = ("cow", "cat", "dog", "owl", "bee", "fox", "pig", "hen")
TRAIN_PER_LABEL, HOLDOUT_PER_LABEL = 3, 2
OVERSIZE_BYTES = 3 * 1024 * 1024  # the bench runs with --max-response-mib 2
# seed -> the kind of unscorable 200 it answers in --hostile mode (train and holdout seeds).
HOSTILE = {
    "cow-0": "nan-reward",
    "cat-0": "reward-7.0",
    "dog-0": "string-reward",
    "owl-3": "bool-reward",
    "bee-3": "negative-cost",
    "fox-3": "oversized-body",
}
FAULTS = ("429", "503", "500", "drop", "slow")


def program(kind: str = "labels") -> dict[str, Any]:
    """``GET /program``: 24 train and 16 holdout seeds; ``other`` is another program."""
    seeds: dict[str, list[str]] = {"train": [], "val": [], "holdout": []}
    for label in LABELS:
        names = [f"{label}-{i}" for i in range(TRAIN_PER_LABEL + HOLDOUT_PER_LABEL)]
        seeds["train"] += names[:TRAIN_PER_LABEL]
        seeds["holdout"] += names[TRAIN_PER_LABEL:]
    components = [{"name": "system_prompt", "kind": "prompt", "text": "Answer with the label."}]
    if kind == "other":
        components.append({"name": "notes", "kind": "prompt", "text": "Be brief."})
    return {
        "protocol": "gepa-container/1",
        "program_id": "chaos-labels" if kind == "labels" else "chaos-other",
        "fingerprint": f"chaos-{kind}-1",
        "description": "Answer the animal's three-letter label; the prompt must name the labels.",
        "components": components,
        "seeds": seeds,
    }


def expected_reward(
    components: dict[str, str], seed: str, *, hostile: bool = False
) -> float | None:
    """The score this container gives; None where no score may exist (a hostile seed)."""
    if hostile and seed in HOSTILE:
        return None
    label = seed.rsplit("-", 1)[0]
    text = components.get("system_prompt", "").lower()
    words = set(text.replace(",", " ").replace(".", " ").replace(":", " ").split())
    return 1.0 if label in words else 0.0


def fault_for(cand: str, seed: str, attempt: int) -> str | None:
    """The fault injected into request number ``attempt`` (0-based) of a (candidate, seed)."""
    if attempt >= 2:
        return None
    roll = int(hashlib.sha256(f"{cand}|{seed}|{attempt}".encode()).hexdigest()[:8], 16) % 100
    share = 30 if attempt == 0 else 12  # percent of requests that fault
    return FAULTS[roll % len(FAULTS)] if roll < share else None


@dataclass
class ChaosContainer:
    """The ASGI app and its state (one per process)."""

    log: Path
    kind: str = "labels"
    token: str | None = None
    faults: bool = False
    hostile: bool = False
    echo_token: bool = False
    delay_s: float = 0.0
    slow_s: float = 3.0
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        auth = headers.get("authorization", "")
        if self.token is not None and auth != f"Bearer {self.token}":
            await _json(send, 401, {"error": {"type": "Unauthorized", "message": "bad token"}})
            return
        path = scope["path"]
        if path == "/health":
            await _json(send, 200, {"status": "ok", "protocol": "gepa-container/1"})
        elif path == "/program":
            await _json(send, 200, program(self.kind))
        elif path == "/rollout" and scope["method"] == "POST":
            await self._rollout(json.loads(await _body(receive)), auth, send)
        else:
            await _json(send, 404, {"error": {"type": "NotFound", "message": path}})

    async def _rollout(self, body: dict[str, Any], auth: str, send: Any) -> None:
        components, seed = body["candidate"], body["seed"]
        cand = content_hash(components)
        fault = self._fault(cand, seed)
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"program": self.kind, "cand": cand, "seed": seed, "fault": fault}))
            fh.write("\n")
        await asyncio.sleep(self.delay_s)
        if fault in ("429", "503", "500"):
            retry = {"429": "0", "503": "1"}.get(fault)
            extra = [(b"retry-after", retry.encode())] if retry else []
            message = {"error": {"type": "Injected", "message": f"injected {fault}"}}
            await _json(send, int(fault), message, extra)
        elif fault == "drop":
            await _drop(send)
        elif fault is not None and fault.startswith("hostile:"):
            await _hostile(send, fault.removeprefix("hostile:"))
        else:
            if fault == "slow":
                await asyncio.sleep(self.slow_s)
            await _json(send, 200, self._answer(components, seed, auth))

    def _fault(self, cand: str, seed: str) -> str | None:
        if self.hostile and seed in HOSTILE:
            return f"hostile:{HOSTILE[seed]}"
        attempt = self.attempts[(cand, seed)]
        self.attempts[(cand, seed)] += 1
        return fault_for(cand, seed, attempt) if self.faults else None

    def _answer(self, components: dict[str, str], seed: str, auth: str) -> dict[str, Any]:
        reward = expected_reward(components, seed)
        label = seed.rsplit("-", 1)[0]
        feedback = "correct" if reward else f"predicted unknown, expected {label}"
        messages = [{"role": "user", "content": f"Which animal is {seed}?"}]
        if self.echo_token:
            token = auth.removeprefix("Bearer ")
            feedback += f" (served for the caller whose credential is {token})"
            messages.append({"role": "system", "content": f"authorized by {token}"})
        return {
            "reward": reward,
            "output": label if reward else "unknown",
            "feedback": feedback,
            "trace": {"messages": messages},
            "usage": {"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.0001},
        }


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(
    send: Any, status: int, data: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    await _raw(send, status, json.dumps(data).encode(), extra)


async def _raw(
    send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), *(extra or [])]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class DroppedOnPurpose(Exception):
    """Raised after half a body: uvicorn then closes the connection mid-response."""


async def _drop(send: Any) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"200")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"reward": 1.0, "feedb', "more_body": True})
    raise DroppedOnPurpose("the chaos container drops this connection")


async def _hostile(send: Any, kind: str) -> None:
    """A 200 that a client must count as one errored rollout, never as a score."""
    usage = '"usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}'
    bodies = {
        "nan-reward": '{"reward": NaN, "feedback": "nan", ' + usage + "}",
        "reward-7.0": '{"reward": 7.0, "feedback": "seven", ' + usage + "}",
        "string-reward": '{"reward": "0.9", "feedback": "string", ' + usage + "}",
        "bool-reward": '{"reward": true, "feedback": "bool", ' + usage + "}",
        "negative-cost": '{"reward": 1.0, "usage": {"input_tokens": 1, "cost_usd": -50.0}}',
    }
    if kind in bodies:
        await _raw(send, 200, bodies[kind].encode())
        return
    # oversized-body: streamed without a Content-Length, so the client must stop reading.
    head = b'{"reward": 1.0, "trace": {"messages": [{"role": "tool", "content": "'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    chunk = b"x" * (64 * 1024)
    for _ in range(OVERSIZE_BYTES // len(chunk)):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b'"}]}}'})


def echoing_reflection_app(seen: list[str]) -> Any:
    """An OpenAI-compatible endpoint that refuses every key and quotes it back in its 401,
    as OpenAI's does; ``seen`` records every key it was sent (to prove one was)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def completions(request: Request) -> JSONResponse:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        seen.append(key)
        message = f"Incorrect API key provided: {key}. You can find your API key at ..."
        error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
        return JSONResponse({"error": error}, status_code=401)

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--program", choices=("labels", "other"), default="labels")
    parser.add_argument("--token", default=None)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--echo-token", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per rollout")
    parser.add_argument("--slow", type=float, default=3.0, help="seconds of a slow answer")
    args = parser.parse_args()
    import uvicorn

    app = ChaosContainer(
        log=args.log,
        kind=args.program,
        token=args.token,
        faults=args.faults,
        hostile=args.hostile,
        echo_token=args.echo_token,
        delay_s=args.delay,
        slow_s=args.slow,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main()
