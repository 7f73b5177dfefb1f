"""The batching student server: its request checks, its decoding rule, and the real model.

The real-model tests send the same Banking77 classifications to the batching server on the
verified 0.5B (``batching_base_url``) and to the stock ``llama_cpp.server``
(``local_llm_base_url``); both fixtures skip without the model unless
``GEPA_REQUIRE_LOCAL_MODEL=1``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from examples.banking77 import build_messages
from examples.banking77.data import GROUPS, load_examples
from optimizer.local_models import LlamaServer
from optimizer.local_models.batching import (
    CompletionRequest,
    RequestError,
    choose_token,
    common_prefix,
)
from optimizer.local_models.server import ModelServerError

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": MESSAGES, "tools": [{"type": "function"}]}, "tools"),
        ({"messages": MESSAGES, "response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": MESSAGES, "stream": True}, "stream"),
        ({"messages": []}, "messages"),
        ({}, "messages"),
        ({"messages": MESSAGES, "max_tokens": 0}, "max_tokens"),
        ({"messages": MESSAGES, "max_tokens": "many"}, "max_tokens"),
    ],
)
def test_a_request_the_server_cannot_answer_names_its_field(body: dict, field: str) -> None:
    with pytest.raises(RequestError, match=f"^{field}:"):
        CompletionRequest.from_json(body)


def test_a_request_takes_llama_cpp_servers_defaults_and_its_own_values() -> None:
    plain = CompletionRequest.from_json({"messages": MESSAGES})
    assert (plain.repeat_penalty, plain.top_k, plain.top_p, plain.min_p) == (1.1, 40, 0.95, 0.05)
    assert plain.stop == ()
    given = CompletionRequest.from_json(
        {"messages": MESSAGES, "temperature": 0, "max_tokens": 5, "stop": "\n", "top_k": None}
    )
    assert (given.temperature, given.max_tokens, given.stop, given.top_k) == (0, 5, ("\n",), 40)


def test_common_prefix_counts_the_shared_leading_tokens() -> None:
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


def test_greedy_choice_weighs_the_repeat_penalty_on_generated_tokens() -> None:
    greedy = CompletionRequest(messages=MESSAGES, temperature=0)
    logits = np.array([1.0, 1.05, -2.0, 0.5], dtype=np.float32)
    assert choose_token(logits, greedy, [], None) == 1
    # token 1 already generated: 1.05 / 1.1 < 1.0, so token 0 wins
    assert choose_token(logits, greedy, [1], None) == 0
    # a negative logit is multiplied, never raised above the others
    assert choose_token(np.array([-1.0, -1.05], dtype=np.float32), greedy, [0], None) == 1
    assert logits[1] == np.float32(1.05)  # the caller's logits are left as they were
    no_penalty = CompletionRequest(messages=MESSAGES, temperature=0, repeat_penalty=1.0)
    assert choose_token(logits, no_penalty, [1], None) == 1


def test_sampling_keeps_to_top_k_and_repeats_for_a_seed() -> None:
    logits = np.linspace(0.0, 5.0, 50).astype(np.float32)
    top1 = CompletionRequest(messages=MESSAGES, temperature=1.0, top_k=1)
    assert choose_token(logits, top1, [], np.random.default_rng(0)) == 49
    wide = CompletionRequest(messages=MESSAGES, temperature=2.0, top_k=5, min_p=0.0, top_p=1.0)
    picks = [choose_token(logits, wide, [], np.random.default_rng(s)) for s in range(40)]
    assert set(picks) <= {45, 46, 47, 48, 49} and len(set(picks)) > 1
    again = [choose_token(logits, wide, [], np.random.default_rng(s)) for s in range(40)]
    assert again == picks


def test_a_batching_server_takes_no_llama_cpp_server_options(tmp_path: Path) -> None:
    with pytest.raises(ModelServerError, match="slots: give 1 or more"):
        LlamaServer(tmp_path / "m.gguf", slots=0)
    with pytest.raises(ModelServerError, match="n_batch"):
        LlamaServer(tmp_path / "m.gguf", slots=4, options={"n_batch": "1024"})


# the real model


def classifications(count: int) -> list[list[dict[str, str]]]:
    """Banking77 card-intent classifications under two system prompts, in runs of four."""
    labels = GROUPS["cards"]
    queries = [e.text for e in load_examples("train") if e.label in labels][:count]
    plain = "Classify the user's banking intent. Return the best matching label."
    ruled = plain + " Rule: a card that has not arrived yet is card_arrival."
    return [
        build_messages(plain if (i // 4) % 2 == 0 else ruled, labels, q)
        for i, q in enumerate(queries)
    ]


async def answer_all(
    base_url: str, conversations: list[list[dict[str, str]]], at_once: int
) -> list[dict]:
    limit = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:

        async def one(messages: list[dict[str, str]]) -> dict:
            async with limit:
                response = await client.post(
                    "/chat/completions",
                    json={"model": "student", "messages": messages, "temperature": 0,
                          "max_tokens": 20},
                )  # fmt: skip
                assert response.status_code == 200, response.text
                return response.json()

        return await asyncio.gather(*(one(m) for m in conversations))


@pytest.mark.local_model
@pytest.mark.slow
async def test_batching_server_answers_as_the_stock_server_does(
    batching_base_url: str, local_llm_base_url: str
) -> None:
    conversations = classifications(16)
    health = batching_base_url.removesuffix("/v1") + "/health"
    before = httpx.get(health).json()
    batched = await answer_all(batching_base_url, conversations, at_once=4)
    after = httpx.get(health).json()
    stock = await answer_all(local_llm_base_url, conversations, at_once=1)

    # the same prompt, tokenized the same way (the model's own chat template)
    assert [b["usage"]["prompt_tokens"] for b in batched] == [
        s["usage"]["prompt_tokens"] for s in stock
    ]
    answers = [b["choices"][0]["message"]["content"] for b in batched]
    theirs = [s["choices"][0]["message"]["content"] for s in stock]
    same = sum(a == t for a, t in zip(answers, theirs, strict=True))
    # the float sums of a batch may break a rare near-tie the other way; a wrong template or
    # decoding rule changes most answers
    assert same >= 13, list(zip(answers, theirs, strict=True))
    assert {b["choices"][0]["finish_reason"] for b in batched} <= {"stop", "length"}

    # requests were decoded together, and shared prompt prefixes were not computed again
    requests = after["requests"] - before["requests"]
    decodes = after["decodes"] - before["decodes"]
    generated = sum(b["usage"]["completion_tokens"] for b in batched)
    assert requests == 16
    assert decodes < requests + generated  # one request at a time needs a decode per token
    reused = after["prompt_reused"] - before["prompt_reused"]
    computed = after["prompt_computed"] - before["prompt_computed"]
    assert reused > 3 * computed  # the label list and the system prompt, once per prompt


@pytest.mark.local_model
@pytest.mark.slow
def test_batching_server_caps_the_answer_and_refuses_what_it_cannot_do(
    batching_base_url: str,
) -> None:
    with httpx.Client(base_url=batching_base_url, timeout=120) as client:
        models = client.get("/models").json()
        assert [m["id"] for m in models["data"]] == ["student"]
        capped = client.post(
            "/chat/completions",
            json={"model": "student", "max_tokens": 2, "temperature": 0,
                  "messages": [{"role": "user", "content": "Count from one to twenty in words."}]},
        ).json()  # fmt: skip
        assert capped["choices"][0]["finish_reason"] == "length"
        assert capped["usage"]["completion_tokens"] == 2
        refused = client.post(
            "/chat/completions",
            json={"model": "student", "messages": MESSAGES, "tools": [{"type": "function"}]},
        )
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith("tools:")
        too_long = client.post(
            "/chat/completions",
            json={"model": "student", "messages": MESSAGES, "max_tokens": 10_000},
        )
        assert too_long.status_code == 400
        assert "max_tokens" in too_long.json()["error"]["message"]
