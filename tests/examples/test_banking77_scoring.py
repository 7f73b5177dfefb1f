"""Banking77 output parsing and verifier feedback."""

from __future__ import annotations

import pytest

from container import AgentResult, Task
from examples.banking77 import UNKNOWN, Banking77Verifier, load_labels, parse_label

LABELS = load_labels()


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("card_arrival", "card_arrival"),
        ("  card_arrival\n", "card_arrival"),
        ("Card Arrival.", "card_arrival"),
        ('"lost-or-stolen-card"', "lost_or_stolen_card"),
        ("Label: top_up_failed", "top_up_failed"),
        (
            "The best matching label is card_payment_wrong_exchange_rate.",
            "card_payment_wrong_exchange_rate",
        ),
        ("exchange_rate, not card_arrival", "exchange_rate"),
        ("I think this is about a card that has not arrived", UNKNOWN),
        ("", UNKNOWN),
        (None, UNKNOWN),
    ],
)
def test_parse_label(text: str | None, label: str) -> None:
    assert parse_label(text, LABELS) == label


EXAMPLES = {
    "card_arrival": ["Where is my card?", "My card has not come yet", "third arrival query"],
    "card_delivery_estimate": ["How long does delivery take?", "When will a card arrive?"],
}
VERIFIER = Banking77Verifier(LABELS, EXAMPLES)
TASK = Task(
    name="b77-test-00001", input={"text": "My card has not come yet"}, expected="card_arrival"
)


def test_correct_answer_scores_one() -> None:
    score = VERIFIER(TASK, AgentResult(output="card_arrival"))
    assert (score.score, score.feedback) == (1.0, "correct: predicted card_arrival")


def test_wrong_label_feedback_shows_both_labels_with_real_queries() -> None:
    score = VERIFIER(TASK, AgentResult(output="card_delivery_estimate"))
    assert score.score == 0.0
    fb = score.feedback
    assert fb.startswith("predicted card_delivery_estimate, expected card_arrival")
    assert "'My card has not come yet'" in fb.split(".")[0]  # the query itself
    assert (
        'Queries labelled card_arrival look like: "Where is my card?"; "third arrival query".' in fb
    )
    assert '"How long does delivery take?"; "When will a card arrive?"' in fb
    assert fb.count("My card has not come yet") == 1  # never offered as an example of itself


def test_answer_that_is_no_label_says_so_and_quotes_it() -> None:
    result = AgentResult(output=UNKNOWN, metadata={"raw_output": "Sorry, I cannot help with that"})
    score = VERIFIER(TASK, result)
    assert score.score == 0.0
    assert "'Sorry, I cannot help with that' is not one of the 77 labels" in score.feedback
    assert "expected card_arrival" in score.feedback
    assert "exactly one label" in score.feedback


def test_verifier_parses_raw_text_outputs_too() -> None:
    assert VERIFIER(TASK, AgentResult(output="Card arrival")).score == 1.0
