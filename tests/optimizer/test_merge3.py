"""Three-way text merge (pure): what rebasing and text merges rely on."""

from __future__ import annotations

from optimizer.gepa.merge3 import merge3, merge_components, units

BASE = "Route the ticket.\n- If it mentions card, route it to Cards."


def test_units_cut_sentences_and_lines_and_join_back() -> None:
    text = "Be brief. Answer with the label!\n\n- a\n  - b"
    assert "".join(units(text)) == text
    assert [u for u in units(text) if u.strip()] == [
        "Be brief.",
        "Answer with the label!",
        "- a",
        "- b",
    ]


def test_two_appended_rules_are_both_kept_ours_first() -> None:
    ours = BASE + "\n- If it mentions refund, route it to Billing."
    theirs = BASE + "\n- If it mentions fraud, route it to Security."
    assert merge3(BASE, ours, theirs) == (
        BASE
        + "\n- If it mentions refund, route it to Billing."
        + "\n- If it mentions fraud, route it to Security."
    )


def test_a_rule_both_sides_added_is_written_once() -> None:
    ours = BASE + "\n- refund: Billing."
    theirs = BASE + "\n- fraud: Security.\n- refund: Billing."
    assert merge3(BASE, ours, theirs) == BASE + "\n- refund: Billing.\n- fraud: Security."


def test_edits_of_different_sentences_of_one_paragraph_merge() -> None:
    base = "Be brief. Use the label list. Never guess."
    ours = "Be very brief. Use the label list. Never guess."
    theirs = "Be brief. Use the label list. Never guess; ask."
    assert merge3(base, ours, theirs) == "Be very brief. Use the label list. Never guess; ask."


def test_different_edits_of_the_same_sentence_conflict() -> None:
    assert merge3("A. B.", "A. C.", "A. D.") is None


def test_an_edit_inside_a_replaced_region_conflicts() -> None:
    base = "one\ntwo\nthree"
    assert merge3(base, "one\nTWO AND THREE", "one\ntwo\n2.5\nthree") is None


def test_trivial_cases_need_no_merge() -> None:
    assert merge3(BASE, BASE, BASE + " x") == BASE + " x"
    assert merge3(BASE, BASE + " y", BASE) == BASE + " y"
    assert merge3(BASE, "same", "same") == "same"


def test_components_merge_only_when_every_one_merges() -> None:
    base = {"a": "x.", "b": "y."}
    assert merge_components(base, {"a": "x. 1.", "b": "y."}, {"a": "x.", "b": "y. 2."}) == {
        "a": "x. 1.",
        "b": "y. 2.",
    }
    assert merge_components(base, {"a": "z.", "b": "y."}, {"a": "w.", "b": "y."}) is None
