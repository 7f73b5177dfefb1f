"""A batching OpenAI-compatible server for the student: several requests in one forward pass.

``python -m llama_cpp.server`` answers one request at a time: four rollouts in flight wait in
line, and each computes its new prompt tokens and its answer token by token on its own. On
two cores a Banking77 classification then takes ~0.47 s warm: ~0.26 s for its ~15 new prompt
tokens and ~0.2 s for its ~4 answer tokens, one forward pass each. This server keeps ``slots``
sequences in one llama.cpp context and decodes every in-flight request's next tokens in one
``llama_decode`` call (continuous batching): a pass for four requests' next tokens took
~0.10 s against ~0.05 s for one, and their prompt tokens run as one larger batch
(``docs/main-job.md``, "The batching student server").

Prompt prefixes are shared, not recomputed: the KV cache is unified, a new request starts
from the slot whose tokens share its longest prefix (copied with ``llama_memory_seq_cp``,
which shares the cells), and what a request shares with requests still waiting is computed
once. The prompt is built as ``llama_cpp.server`` builds it (the model's own chat template,
tokenized the same way), and decoding follows its defaults for a request: at temperature 0
the greedy choice after its repeat penalty (1.1 over the last 64 generated tokens). The
answers are the stock server's but for rare near-ties: in a batch the attention sums its
terms in another order, so a tie may break the other way, and which requests share a batch
varies from run to run (``bench/student_batching.py`` counts the answers that differ). Above
temperature 0 it samples with top-k, top-p and min-p as the stock server's defaults do (not
bit for bit theirs).

Only what a student needs: ``GET /v1/models`` and non-streaming ``POST /v1/chat/completions``
(messages, temperature, max_tokens, stop, top_p, top_k, min_p, repeat_penalty, seed); a
request with tools, a response format or streaming gets a 400 that names the field.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BatchingEngine", "Completion", "CompletionRequest", "main"]

UNSUPPORTED = ("tools", "tool_choice", "functions", "response_format", "logprobs", "n")
PENALTY_WINDOW = 64  # llama_cpp.Llama's last_n_tokens_size


class RequestError(ValueError):
    """A request this server cannot answer; the message names the field."""


@dataclass(frozen=True)
class CompletionRequest:
    """One chat completion, as the engine needs it."""

    messages: list[dict[str, Any]]
    max_tokens: int = 256
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CompletionRequest:
        """Check an OpenAI request body; raise ``RequestError`` naming a bad field."""
        for name in UNSUPPORTED:
            if body.get(name) not in (None, False, 1):
                raise RequestError(f"{name}: not supported by the batching student server")
        if body.get("stream"):
            raise RequestError("stream: not supported by the batching student server")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages: give a non-empty list of chat messages")
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(stop)
        defaults = cls(messages=messages)
        values = {
            name: body[name] if body.get(name) is not None else getattr(defaults, name)
            for name in ("max_tokens", "temperature", "top_p", "top_k", "min_p",
                         "repeat_penalty", "seed")
        }  # fmt: skip
        if not isinstance(values["max_tokens"], int) or values["max_tokens"] < 1:
            raise RequestError("max_tokens: give a positive integer")
        return cls(messages=messages, stop=stop, **values)


@dataclass
class Completion:
    """What the engine answers: the text, why it stopped, and the token counts."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class _Sequence:
    """One request in a slot: its prompt, what it generated, and what the next decode feeds."""

    request: CompletionRequest
    prompt: list[int]
    stops: tuple[str, ...]
    future: Future[Completion]
    slot: int = -1
    pending: list[int] = field(default_factory=list)  # tokens the next decode feeds
    generated: list[int] = field(default_factory=list)
    rng: np.random.Generator | None = None


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def choose_token(
    logits: np.ndarray,
    request: CompletionRequest,
    recent: Sequence[int],
    rng: np.random.Generator | None,
) -> int:
    """The next token: the repeat penalty over ``recent``, then greedy or sampled."""
    if request.repeat_penalty != 1.0 and recent:
        ids = np.unique(np.asarray(recent[-PENALTY_WINDOW:], dtype=np.intp))
        seen = logits[ids]
        logits = logits.copy()
        logits[ids] = np.where(
            seen > 0, seen / request.repeat_penalty, seen * request.repeat_penalty
        )
    if request.temperature <= 0 or rng is None:
        return int(np.argmax(logits))
    k = min(max(request.top_k, 1), logits.size) if request.top_k > 0 else logits.size
    top = np.argpartition(-logits, k - 1)[:k]
    top = top[np.argsort(-logits[top], kind="stable")]
    probs = np.exp((logits[top] - logits[top[0]]) / request.temperature)
    probs /= probs.sum()
    keep = (np.cumsum(probs) - probs < request.top_p) & (probs >= request.min_p * probs[0])
    probs = np.where(keep, probs, 0.0)
    return int(top[rng.choice(top.size, p=probs / probs.sum())])


class BatchingEngine:
    """The model, one context with ``slots`` sequences, and a thread that decodes them together.

    ``submit`` returns a future for a completion; the thread admits waiting requests into free
    slots at every step, so a request arriving mid-generation joins the next forward pass.
    """

    def __init__(
        self, model_path: str, *, slots: int = 4, n_ctx: int = 4096, n_threads: int = 2,
        n_threads_batch: int | None = None, n_batch: int = 512,
    ) -> None:  # fmt: skip
        import llama_cpp
        from llama_cpp import llama_chat_format

        self._lib = llama_cpp
        # The vocabulary, chat template and tokenizer, as llama_cpp.server builds them; its own
        # small context stays unused: the engine's context below does the work.
        self.llama = llama_cpp.Llama(
            model_path=model_path, n_ctx=64, n_batch=64, n_threads=n_threads, verbose=False
        )
        template = self.llama.metadata.get("tokenizer.chat_template")
        if template is None:
            raise SystemExit(f"{model_path} has no chat template; the batching server needs one")
        eos, bos = self.llama.token_eos(), self.llama.token_bos()
        self.formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=self.llama._model.token_get_text(eos) if eos != -1 else "",
            bos_token=self.llama._model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, n_batch
        params.n_seq_max, params.kv_unified = slots, True
        params.n_threads = n_threads
        params.n_threads_batch = n_threads if n_threads_batch is None else n_threads_batch
        self.ctx = llama_cpp.llama_init_from_model(self.llama._model.model, params)
        if not self.ctx:
            raise SystemExit(f"could not create a llama.cpp context of {n_ctx} tokens")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.vocab = self.llama._model.vocab
        self.n_vocab, self.n_ctx, self.n_batch, self.slots = (
            self.llama.n_vocab(),
            n_ctx,
            n_batch,
            slots,
        )
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.held: list[list[int]] = [
            [] for _ in range(slots)
        ]  # each slot's tokens in the KV cache
        self.waiting: queue.Queue[_Sequence] = queue.Queue()
        self.stats = {"requests": 0, "decodes": 0, "prompt_computed": 0, "prompt_reused": 0}
        self._thread = threading.Thread(target=self._loop, name="batching-engine", daemon=True)
        self._thread.start()

    # requests

    def submit(self, request: CompletionRequest) -> Future[Completion]:
        """Queue ``request``; the future resolves to its ``Completion`` (or a ``RequestError``)."""
        result = self.formatter(messages=request.messages)
        prompt = self.llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        future: Future[Completion] = Future()
        if len(prompt) + request.max_tokens > self.n_ctx:
            future.set_exception(RequestError(
                f"messages: {len(prompt)} prompt tokens and max_tokens {request.max_tokens} "
                f"exceed the context of {self.n_ctx}; shorten the messages or max_tokens"
            ))  # fmt: skip
            return future
        rstop = (
            result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        )
        rng = None if request.temperature <= 0 else np.random.default_rng(request.seed)
        self.waiting.put(_Sequence(request, prompt, (*request.stop, *rstop), future, rng=rng))
        return future

    # the decoding thread

    def _loop(self) -> None:
        active: list[_Sequence] = []
        while True:
            if not active:
                active.append(self._start(self.waiting.get(), active))
            while len(active) < self.slots:
                try:
                    active.append(self._start(self.waiting.get_nowait(), active))
                except queue.Empty:
                    break
            try:
                self._step(active)
            except Exception as exc:  # noqa: BLE001 - fail the requests, keep serving: a dead
                # thread would leave every caller waiting for ever
                for seq in active:
                    seq.future.set_exception(exc)
                    self._forget(seq.slot)
                active = []
            active = [s for s in active if not s.future.done()]

    def _start(self, seq: _Sequence, active: list[_Sequence]) -> _Sequence:
        """Put ``seq`` in a free slot, on the longest prefix any slot holds; compute the part
        it shares with requests still waiting once, so they reuse it."""
        busy = {s.slot for s in active}
        free = [i for i in range(self.slots) if i not in busy]
        # the most that stays usable: the prompt less its last token (whose logits we need)
        want = seq.prompt[: len(seq.prompt) - 1]
        source, reuse = max(
            ((i, common_prefix(self.held[i], want)) for i in range(self.slots)),
            key=lambda pair: (pair[1], pair[0] in free),
        )
        slot = (
            source if source in free else max(free, key=lambda i: common_prefix(self.held[i], want))
        )
        if slot != source and reuse > 0:
            self._lib.llama_memory_seq_rm(self.memory, slot, 0, -1)
            self._lib.llama_memory_seq_cp(self.memory, source, slot, 0, reuse)
            self.held[slot] = self.held[source][:reuse]
        else:
            reuse = common_prefix(self.held[slot], want)
            self._lib.llama_memory_seq_rm(self.memory, slot, reuse, -1)
            self.held[slot] = self.held[slot][:reuse]
        shared = max((common_prefix(w.prompt, want) for w in list(self.waiting.queue)), default=0)
        if shared > reuse:  # others waiting share more: compute it now, for them too
            self._decode([(slot, want[reuse:shared], False)])
            self.held[slot] = want[:shared]
            reuse = shared
        seq.slot, seq.pending = slot, seq.prompt[reuse:]
        self.stats["prompt_reused"] += reuse
        self.stats["prompt_computed"] += len(seq.prompt) - reuse
        self.stats["requests"] += 1
        return seq

    def _step(self, active: list[_Sequence]) -> None:
        """One decode of every active request's pending tokens; then each picks its next."""
        rows = self._decode([(s.slot, s.pending, True) for s in active])
        for seq, row in zip(active, rows, strict=True):
            self.held[seq.slot] = self.held[seq.slot] + seq.pending
            logits = np.ctypeslib.as_array(
                self._lib.llama_get_logits_ith(self.ctx, row), shape=(self.n_vocab,)
            )
            token = choose_token(logits, seq.request, seq.generated, seq.rng)
            self._advance(seq, token)

    def _advance(self, seq: _Sequence, token: int) -> None:
        """Take ``token`` into ``seq``, or finish it (end of generation, a stop, the length)."""
        if self._lib.llama_vocab_is_eog(self.vocab, token):
            return self._finish(seq, "stop")
        seq.generated.append(token)
        text = self._text(seq.generated)
        for stop in seq.stops:
            if stop and stop in text:
                return self._finish(seq, "stop", text[: text.index(stop)])
        if len(seq.generated) >= seq.request.max_tokens:
            return self._finish(seq, "length")
        seq.pending = [token]
        return None

    def _finish(self, seq: _Sequence, reason: str, text: str | None = None) -> None:
        seq.future.set_result(Completion(
            text=self._text(seq.generated) if text is None else text, finish_reason=reason,
            prompt_tokens=len(seq.prompt), completion_tokens=len(seq.generated),
        ))  # fmt: skip

    def _text(self, tokens: list[int]) -> str:
        return self.llama.detokenize(tokens).decode("utf-8", errors="ignore")

    def _forget(self, slot: int) -> None:
        if slot >= 0:
            self._lib.llama_memory_seq_rm(self.memory, slot, -1, -1)
            self.held[slot] = []

    def _decode(self, parts: list[tuple[int, list[int], bool]]) -> list[int]:
        """Decode each ``(slot, tokens, want_logits)`` at the slot's next positions, in chunks
        of ``n_batch``; the batch row of each part's last token when it wants logits.

        A full KV cache first drops what idle slots hold, then fails the decode."""
        flat = sorted(
            (
                (slot, token, len(self.held[slot]) + i, want and i == len(tokens) - 1)
                for slot, tokens, want in parts
                for i, token in enumerate(tokens)
            ),
            key=lambda row: row[3],  # stable: the rows wanting logits last, in the final chunk
        )
        rows: list[int] = []
        for start in range(0, len(flat), self.n_batch):
            chunk = flat[start : start + self.n_batch]
            batch = self.batch
            for row, (slot, token, pos, logits) in enumerate(chunk):
                batch.token[row], batch.pos[row] = token, pos
                batch.n_seq_id[row], batch.seq_id[row][0] = 1, slot
                batch.logits[row] = logits
                if logits:
                    rows.append(row)
            batch.n_tokens = len(chunk)
            code = self._lib.llama_decode(self.ctx, batch)
            if code == 1:  # no room in the KV cache: drop idle slots' prefixes and retry once
                using = {slot for slot, _, _ in parts}
                for idle in range(self.slots):
                    if idle not in using:
                        self._forget(idle)
                code = self._lib.llama_decode(self.ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode failed with code {code}")
            self.stats["decodes"] += 1
        return rows


# the HTTP surface


def build_app(engine: BatchingEngine, alias: str) -> Any:
    """A Starlette app: ``GET /v1/models`` and ``POST /v1/chat/completions``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": alias, "object": "model", "owned_by": "me", "permissions": []}
        ]})  # fmt: skip

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", **engine.stats})

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise RequestError("body: give a JSON object")
            completion = await asyncio.wrap_future(engine.submit(CompletionRequest.from_json(body)))
        except (RequestError, ValueError) as exc:
            return JSONResponse(
                {"error": {"message": str(exc), "type": "invalid_request_error"}}, 400
            )
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or alias,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "logprobs": None,
                "finish_reason": completion.finish_reason,
            }],
            "usage": {
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
            },
        })  # fmt: skip

    return Starlette(routes=[
        Route("/v1/models", models),
        Route("/health", health),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m optimizer.local_models.batching --model M.gguf --port P [--slots 4]``."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a GGUF file")
    parser.add_argument("--model_alias", default="student", help="the name GET /v1/models lists")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--slots", type=int, default=4, help="requests decoded together")
    parser.add_argument("--n_ctx", type=int, default=4096, help="KV cache cells, all slots")
    parser.add_argument("--n_threads", type=int, default=2)
    parser.add_argument("--n_threads_batch", type=int, default=None)
    parser.add_argument("--n_batch", type=int, default=512)
    args = parser.parse_args(argv)
    if args.slots < 1:
        parser.error("--slots: give 1 or more")
    engine = BatchingEngine(
        args.model, slots=args.slots, n_ctx=args.n_ctx, n_threads=args.n_threads,
        n_threads_batch=args.n_threads_batch, n_batch=args.n_batch,
    )  # fmt: skip
    uvicorn.run(
        build_app(engine, args.model_alias), host=args.host, port=args.port, log_level="warning"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
