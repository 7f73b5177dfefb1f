"""Fakes for the proposer tests: scripted chat completions and Banking77-like failures."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import httpx
import respx

from proposer import (
    CandidateView,
    ComponentSpec,
    Evaluation,
    ProposalRequest,
    Proposer,
    ProposerConfig,
)

BASE = "http://127.0.0.1:9/v1"
PARENT_PROMPT = (
    "Classify the user's banking intent. Return the best matching label.\n"
    "Labels: card_arrival, card_delivery_estimate, lost_or_stolen_card, card_not_working, "
    "top_up_failed, pending_top_up, exchange_rate, wrong_exchange_rate_for_cash_withdrawal"
)
SPECS = (ComponentSpec("system_prompt", "prompt", "System prompt of the intent classifier."),)

# (query, predicted, expected): misclassifications a small student really makes.
MISSES = [
    ("How long does it take for a new card to get here?", "card_arrival", "card_delivery_estimate"),
    ("My top-up is still showing as pending, why?", "top_up_failed", "pending_top_up"),
    (
        "I got less cash than I expected at the ATM abroad",
        "exchange_rate",
        "wrong_exchange_rate_for_cash_withdrawal",
    ),
    ("Someone took my card from my bag", "card_not_working", "lost_or_stolen_card"),
    ("When will my card be delivered?", "card_arrival", "card_delivery_estimate"),
    ("Top up didn't go through yet, it's been an hour", "top_up_failed", "pending_top_up"),
]
HITS = [
    ("What is today's euro exchange rate?", "exchange_rate"),
    ("My card still hasn't arrived after 3 weeks", "card_arrival"),
]


def rollout(
    seed: str, query: str, output: str, expected: str, system: str = PARENT_PROMPT
) -> Evaluation:
    """A Banking77-style rollout with a chat trace."""
    reward = 1.0 if output == expected else 0.0
    feedback = "correct" if reward else f"predicted {output}, expected {expected}"
    trace = {
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": query},
            {"role": "assistant", "content": output},
        ]
    }
    return Evaluation(seed=seed, reward=reward, output=output, feedback=feedback, trace=trace)


def banking_evaluations(n_failures: int = 3, n_successes: int = 1) -> tuple[Evaluation, ...]:
    """``n_failures`` misclassifications and ``n_successes`` correct answers."""
    fails = [
        rollout(f"b77-train-{i:04d}", q, p, e) for i, (q, p, e) in enumerate(MISSES[:n_failures])
    ]
    hits = [
        rollout(f"b77-train-1{i:03d}", q, lab, lab) for i, (q, lab) in enumerate(HITS[:n_successes])
    ]
    return tuple(fails + hits)


def parent_view(prompt: str = PARENT_PROMPT, candidate_id: str = "parent0001") -> CandidateView:
    """The parent candidate."""
    return CandidateView(candidate_id=candidate_id, components={"system_prompt": prompt})


def banking_request(**overrides: Any) -> ProposalRequest:
    """A mutation request over Banking77-like failures."""
    values: dict[str, Any] = {
        "program_description": "Banking77 intent classification: map a customer message to one of 77 intents.",
        "components": SPECS,
        "parent": parent_view(),
        "evaluations": banking_evaluations(),
    }
    values.update(overrides)
    return ProposalRequest(**values)


def config(**overrides: Any) -> ProposerConfig:
    """A proposer config pointing at the fake local endpoint (no key needed)."""
    values: dict[str, Any] = {
        "model": "reflector",
        "base_url": BASE,
        "max_retries": 0,
        "timeout_s": 5.0,
    }
    values.update(overrides)
    return ProposerConfig(**values)


def make_proposer(**overrides: Any) -> Proposer:
    """A proposer on the fake endpoint with a seeded rng."""
    return Proposer(config(**overrides), rng=random.Random(7))


_ids = itertools.count()


def tool_call(name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    """One OpenAI tool call; ``args`` as a dict (JSON-encoded) or raw text."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    model: str = "reflector",
) -> dict[str, Any]:
    """A chat completion body as an OpenAI-compatible server returns it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text_answer(
    prompt: str, rationale: str = "Separate delivery-time questions from arrival."
) -> str:
    """A well-formed text-mode answer for ``system_prompt``: the block, then the rationale."""
    return f"<<<COMPONENT system_prompt\n{prompt}\n>>>\nRATIONALE: {rationale}"


class Script:
    """Scripted replies of a fake chat endpoint; records every request body it got."""

    def __init__(self, *replies: dict[str, Any] | httpx.Response) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.raw: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.raw.append(request)
        self.requests.append(json.loads(request.content))
        if not self.replies:
            return httpx.Response(500, json={"error": {"message": "script exhausted"}})
        reply = self.replies.pop(0)
        return reply if isinstance(reply, httpx.Response) else httpx.Response(200, json=reply)

    def last_user_text(self, index: int = -1) -> str:
        """The text of every message of request ``index`` after the system prompt."""
        return "\n".join(str(m.get("content") or "") for m in self.requests[index]["messages"][1:])


def scripted(api: respx.MockRouter, *replies: dict[str, Any] | httpx.Response) -> Script:
    """Route ``POST /chat/completions`` of ``api`` to a new ``Script``."""
    script = Script(*replies)
    api.post("/chat/completions").mock(side_effect=script)
    return script
