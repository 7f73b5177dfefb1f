"""Run text, auto and agent mode on the same Banking77-like failures with a local model.

Not a test: the measurement behind docs/proposer-modes.md. Needs the local GGUF models and
llama-cpp-python (``gepa-runtime models install``). Usage::

    .venv/bin/python -m tests.proposer.compare_modes [ROLE[:MODE,...] ...]
    e.g. student:text,auto reflection   (roles: student = 0.5B, reflection = 1.5B)

``GEPA_COMPARE_THREADS`` sets llama.cpp's threads (default 2).

Prints, per model and mode, the proposal (or the rejection), its usage and wall time.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from optimizer.local_models import LlamaServer, free_port, model_path
from proposer import ChatReply, ModelClient, Proposer, ProposerConfig
from schemas import ProposerError
from tests.proposer.fakes import banking_evaluations, banking_request


class RecordingClient(ModelClient):
    """A ``ModelClient`` that keeps every reply, to show what the model actually wrote."""

    def __init__(self, config: ProposerConfig) -> None:
        super().__init__(config)
        self.replies: list[ChatReply] = []

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """``ModelClient.chat``, recorded."""
        started = time.monotonic()
        reply = await super().chat(messages, tools=tools, max_tokens=max_tokens)
        self.replies.append(reply)
        calls = [f"{c.name}({c.arguments[:200]})" for c in reply.tool_calls]
        print(
            f"- reply {len(self.replies)} ({'with' if tools else 'without'} tools, "
            f"{time.monotonic() - started:.0f}s, finish={reply.finish_reason}, "
            f"{reply.usage.output_tokens} tokens out, tool_calls={calls}):\n"
            f"```text\n{reply.content}\n```",
            flush=True,
        )
        return reply


async def run_mode(base_url: str, alias: str, mode: str) -> None:
    """One proposal in ``mode``; prints what came back."""
    config = ProposerConfig(
        model=alias,
        base_url=base_url,
        mode=mode,
        max_steps=4,
        max_tokens=700,
        temperature=0.0,
        evidence_token_budget=1200,
        max_prompt_chars=3000,
        timeout_s=900.0,
        max_retries=0,
    )
    proposer = Proposer(config, client=RecordingClient(config), rng=random.Random(0))
    request = banking_request(evaluations=banking_evaluations(6, 2))
    started = time.monotonic()
    print(f"\n### {alias} / mode={mode}\n", flush=True)
    try:
        proposal = await proposer.propose(request)
    except ProposerError as exc:
        print(f"REJECTED ({type(exc).__name__}): {exc}\nusage: {exc.usage}")
    else:
        print(
            f"mode used: {proposal.mode}; rationale: {proposal.rationale}\nusage: {proposal.usage}"
        )
        print("new system_prompt:\n```\n" + proposal.components["system_prompt"] + "\n```")
        print("diff:\n```diff\n" + proposal.diff + "```")
    finally:
        await proposer.aclose()
    print(
        f"wall time: {time.monotonic() - started:.1f}s; decided mode: {proposer.mode}", flush=True
    )


async def main(specs: list[str]) -> None:
    """Serve each model in turn and run the requested modes against it."""
    threads = int(os.environ.get("GEPA_COMPARE_THREADS", "2"))
    for spec in specs:
        role, _, modes = spec.partition(":")
        with LlamaServer(
            model_path(role), alias=role, port=free_port(), n_threads=threads
        ) as server:
            for mode in (modes or "text,auto,agent").split(","):
                await run_mode(server.base_url, role, mode)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or ["student", "reflection"]))
