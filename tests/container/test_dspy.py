"""container.dspy without a model: components, candidates written back, the metric, the export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("dspy")

import dspy  # noqa: E402

from container import AgentResult, Task  # noqa: E402
from container.dspy import (  # noqa: E402
    PARSE_ERROR,
    _metric_verifier,
    apply_candidate,
    dspy_components,
    save_components,
)
from schemas import UserError  # noqa: E402
from tests.fakes.dspy_program import SoundProgram, metric  # noqa: E402


def _with_demo() -> SoundProgram:
    program = SoundProgram()
    program.guess.demos = [dspy.Example(sound="It goes 'moo'.", label="cow")]
    return program


def test_components_are_instructions_and_searched_demos() -> None:
    assert dspy_components(SoundProgram()) == {
        "guess": "Name the animal that makes the sound.",
        "answer": "Give the final answer: the animal.",
    }
    with_demos = dspy_components(_with_demo(), search_demos=True)
    assert json.loads(with_demos["guess.demos"]) == [{"sound": "It goes 'moo'.", "label": "cow"}]
    assert json.loads(with_demos["answer.demos"]) == []


def test_a_candidate_is_written_into_a_copy() -> None:
    program = _with_demo()
    copy = apply_candidate(
        program, {"guess": "New.", "guess.demos": '[{"sound": "s", "label": "l"}]'}
    )
    assert copy.guess.signature.instructions == "New." and copy.guess.demos[0].label == "l"
    assert program.guess.signature.instructions == "Name the animal that makes the sound."
    assert program.guess.demos[0].label == "cow"  # the original is untouched
    with pytest.raises(UserError, match=r"guess\.demos must be a JSON list of objects"):
        apply_candidate(program, {"guess.demos": '{"a": 1}'})


def test_export_is_what_program_load_reads(tmp_path: Path) -> None:
    path = tmp_path / "best.json"
    save_components({"guess": "Name it: cow.", "answer": "Say the label."}, path)
    program = _with_demo()
    program.load(str(path))
    assert program.guess.signature.instructions == "Name it: cow."
    assert program.answer.signature.instructions == "Say the label."
    assert program.guess.demos[0].label == "cow"  # demos not searched: the program's own stay
    assert "dependency_versions" in json.loads(path.read_text())["metadata"]  # DSPy's own save
    save_components(
        {"guess": "x", "guess.demos": '[{"sound": "a", "label": "b"}]', "answer": "y"}, path
    )
    program.load(str(path))
    assert [d["label"] for d in program.guess.demos] == ["b"]


async def test_the_metric_becomes_score_and_feedback() -> None:
    verifier = _metric_verifier(metric)
    task = Task(name="train-0000", input={"sound": "It goes 'moo'."}, expected={"answer": "cow"})
    right = await verifier.score(task, AgentResult(output={"answer": "cow"}))
    wrong = await verifier.score(task, AgentResult(output={"answer": "dog"}))
    unparsed = await verifier.score(task, AgentResult(output={PARSE_ERROR: "no [[ ## label ## ]]"}))
    assert (right.score, right.feedback) == (1.0, "correct")
    assert (wrong.score, wrong.feedback) == (0.0, "predicted dog, expected cow")
    assert unparsed.score == 0.0 and "did not parse: no [[ ## label ## ]]" in unparsed.feedback
    plain = _metric_verifier(lambda gold, pred: pred.answer == gold.answer)
    assert (await plain.score(task, AgentResult(output={"answer": "cow"}))).score == 1.0
