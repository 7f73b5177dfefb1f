"""A DSPy program with two predictors, its GEPA-style metric and its examples (for the tests).

``guess`` names the animal of a sound, ``answer`` gives the final answer from the sound and
the label; the scripted student (:mod:`tests.fakes.dspy_student`) names an animal only when
``guess``'s instructions name it, so the instructions are what an optimization improves.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402 - after the variable LiteLLM reads on import

ANIMALS = {"moo": "cow", "meow": "cat", "woof": "dog", "hoot": "owl", "buzz": "bee", "oink": "pig"}


class Guess(dspy.Signature):
    """Name the animal that makes the sound."""

    sound: str = dspy.InputField()
    label: str = dspy.OutputField()


class Answer(dspy.Signature):
    """Give the final answer: the animal."""

    sound: str = dspy.InputField()
    label: str = dspy.InputField()
    answer: str = dspy.OutputField()


class SoundProgram(dspy.Module):
    """guess -> answer."""

    def __init__(self) -> None:
        super().__init__()
        self.guess = dspy.Predict(Guess)
        self.answer = dspy.Predict(Answer)

    def forward(self, sound: str) -> Any:
        label = self.guess(sound=sound).label
        return self.answer(sound=sound, label=label)


def metric(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    """GEPA-style: a score and feedback naming what was expected."""
    ok = str(pred.answer).strip().lower() == gold.answer
    feedback = "correct" if ok else f"predicted {pred.answer}, expected {gold.answer}"
    return dspy.Prediction(score=float(ok), feedback=feedback)


def examples(template: str) -> list[Any]:
    """One example per animal, the sound said as ``template`` says it."""
    return [
        dspy.Example(sound=template.format(sound), answer=animal).with_inputs("sound")
        for sound, animal in ANIMALS.items()
    ]


TRAIN = "It goes '{}'."
HOLDOUT = "Far away, something goes '{}' again."


def rows() -> list[dict[str, Any]]:
    """The same examples as dataset rows (for ``gepa-runtime container --dspy``)."""
    out = []
    for split, template in (("train", TRAIN), ("holdout", HOLDOUT)):
        for sound, animal in ANIMALS.items():
            out.append({"name": f"{split}-{animal}", "input": {"sound": template.format(sound)},
                        "expected": {"answer": animal}})  # fmt: skip
    return out


def program() -> SoundProgram:
    """The program, on the LM that ``DSPY_STUDENT_BASE`` points at (for the CLI)."""
    base = os.environ["DSPY_STUDENT_BASE"]
    dspy.configure(lm=dspy.LM("openai/student", api_base=base, api_key="local", cache=False))
    return SoundProgram()
