"""Rollouts rendered for the reflection model under a token budget: deterministic sampling and explicit truncation notes."""

from __future__ import annotations

import random

from proposer import Evaluation
from proposer.brief import brief_for_proposal, evidence_for
from proposer.render import render_evaluations, render_trace, task_input
from tests.proposer.fakes import (
    banking_request,
    completion,
    make_proposer,
    rollout,
    scripted,
    text_answer,
)


def many_failures(n: int, query_chars: int = 200) -> list[Evaluation]:
    return [
        rollout(
            f"seed-{i:03d}",
            f"query {i} " + "x" * query_chars,
            "card_arrival",
            "card_delivery_estimate",
        )
        for i in range(n)
    ]


def test_failures_over_budget_are_sampled_and_counted() -> None:
    text = render_evaluations(many_failures(20), budget_tokens=400, rng=random.Random(1))
    shown = text.count("### seed")
    assert 1 <= shown < 20
    assert f"({20 - shown} more failures not shown: evidence budget)" in text
    assert len(text) <= 400 * 4 + 200  # the budget, plus the section headers


def test_sampling_is_deterministic_for_a_given_rng_seed() -> None:
    evals = many_failures(20)
    one = render_evaluations(evals, budget_tokens=400, rng=random.Random(5))
    assert one == render_evaluations(evals, budget_tokens=400, rng=random.Random(5))
    others = {render_evaluations(evals, budget_tokens=400, rng=random.Random(s)) for s in range(6)}
    assert len(others) > 1  # the sample depends on the rng, not on list order alone


def test_long_fields_are_truncated_with_a_note() -> None:
    evals = [rollout("s0", "q" * 9000, "card_arrival", "card_delivery_estimate")]
    text = render_evaluations(evals, budget_tokens=500, rng=random.Random(0))
    assert "[... input truncated: " in text and "chars omitted ...]" in text
    assert len(text) < 3000


def test_trace_truncation_says_how_much_was_omitted() -> None:
    evaluation = Evaluation(
        "s", 0.0, "x", "", {"messages": [{"role": "user", "content": "u" * 10_000}]}
    )
    text = render_trace(evaluation, 2000)  # "[user] " + 10,000 chars = 10,007
    assert "[... trace truncated: 8,007 chars omitted ...]" in text


def test_input_comes_from_the_first_user_message_or_an_input_field() -> None:
    chat = Evaluation(
        "s",
        0.0,
        "o",
        "f",
        {
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "part one"}]},
                {"role": "user", "content": "tool result"},
            ]
        },
    )
    assert task_input(chat) == "part one\n(+1 more user messages in the trace)"
    assert task_input(Evaluation("s", 0.0, "o", "f", {"input": {"q": 1}})) == '{"q": 1}'


def test_errored_rollouts_are_failures_and_say_so() -> None:
    errored = Evaluation("s9", None, None, "container timed out", {}, status="error")
    text = render_evaluations([errored], budget_tokens=500, rng=random.Random(0))
    assert "seed s9 (rollout error)" in text and "container timed out" in text


async def test_the_prompt_says_what_was_left_out(api) -> None:
    script = scripted(api, completion(text_answer("A better prompt.")))
    request = banking_request(evaluations=tuple(many_failures(30, query_chars=600)))
    await make_proposer(mode="text", evidence_token_budget=800).propose(request)
    user = script.requests[0]["messages"][1]["content"]
    assert "more failures not shown" in user
    assert "## Failures (30 of 30 rollouts)" in user


def test_successes_are_shown_briefly_and_counted() -> None:
    hits = [rollout(f"ok-{i}", f"question {i}", "card_arrival", "card_arrival") for i in range(5)]
    text = render_evaluations(many_failures(1) + hits, budget_tokens=2000, rng=random.Random(0))
    assert "## Successes (5: behaviour to keep)" in text
    assert "- seed ok-0 (reward 1.00): input: 'question 0' -> output: 'card_arrival'" in text
    assert "(2 more successes not shown)" in text


def test_the_parents_other_train_failures_follow_the_minibatch_under_one_budget() -> None:
    minibatch = many_failures(2)
    context = tuple(
        rollout(f"other-{i:03d}", f"other query {i} " + "y" * 200, "lost_card", f"label_{i}")
        for i in range(40)
    ) + (rollout("other-ok", "fine", "balance", "balance"),)
    brief = brief_for_proposal(
        banking_request(evaluations=tuple(minibatch), train_evaluations=context)
    )
    text = evidence_for(brief, budget_tokens=1500, rng=random.Random(0))
    head, sep, rest = text.partition("## Other training examples (40 failures of 41")
    assert sep and "### seed seed-000" in head  # the minibatch in detail first
    shown = rest.count("- seed other-")
    assert 1 <= shown < 40 and f"({40 - shown} more failures not shown" in rest
    assert "expected label_" in rest or "label_" in rest  # feedback, one line each
    assert "other-ok" not in rest  # successes of the rest of train are not listed
    assert len(text) <= 1500 * 4 + 400
    # A request without context renders exactly as before.
    plain = brief_for_proposal(banking_request(evaluations=tuple(minibatch)))
    assert evidence_for(plain, budget_tokens=1500, rng=random.Random(0)) == render_evaluations(
        minibatch, budget_tokens=1500, rng=random.Random(0)
    )


def test_minibatch_seeds_are_not_repeated_as_context() -> None:
    minibatch = many_failures(2)
    brief = brief_for_proposal(
        banking_request(evaluations=tuple(minibatch), train_evaluations=tuple(many_failures(3)))
    )
    assert [e.seed for e in brief.context] == ["seed-002"]
