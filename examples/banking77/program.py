"""Assemble the Banking77 container: target options, verifier, sampled dataset, ASGI app.

``target_options`` is what ``@optimize`` gets, shared by ``app.py`` (served by
``gepa-runtime container examples/banking77/app.py``) and ``create_banking77_app`` (used by
``python -m examples.banking77`` and the tests). The student model's name goes into the
target's ``version``, which the SDK folds into the program fingerprint: switching models
invalidates cached rollouts. (A local server's alias, e.g. ``student``, names the server and not
its weights: set ``GEPA_STUDENT_MODEL`` to something more specific if you swap GGUF files.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openai import AsyncOpenAI
from starlette.applications import Starlette

from container import AgentResult, Candidate, Task, create_app, optimize
from container.target import Registry, Target
from examples.banking77.agent import Banking77Agent, StudentSettings
from examples.banking77.data import (
    DATA_DIR,
    SampleConfig,
    examples_by_label,
    load_examples,
    prepare_dataset,
)
from examples.banking77.verifier import Banking77Verifier

__all__ = ["BASELINE", "PROGRAM_ID", "build_target", "create_banking77_app", "target_options"]

PROGRAM_ID = "banking77-intent"
BASELINE = "Classify the user's banking intent. Return the best matching label."


def description(labels: int) -> str:
    """The component's description for a task of ``labels`` intents."""
    return (
        "System prompt of a Banking77 intent classifier. The user message is a customer's "
        f"query; the list of the {labels} allowed labels comes before this prompt in the "
        "system message (fixed by the program, not part of this text). The model must answer "
        "with exactly one label."
    )


def target_options(
    settings: StudentSettings, sample: SampleConfig, *, dataset_dir: Path | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``@optimize``: id, kind, baseline, verifier, dataset, version."""
    labels = sample.labels(DATA_DIR)
    verifier = Banking77Verifier(labels, examples_by_label(load_examples("train", DATA_DIR)))
    return {
        "id": PROGRAM_ID,
        "kind": "prompt",
        "description": description(len(labels)),
        "baseline": BASELINE,
        "verifier": verifier,
        "dataset": str(prepare_dataset(sample, dataset_dir)),
        "version": f"student={settings.model}",
    }


def build_target(
    settings: StudentSettings,
    sample: SampleConfig,
    *,
    client: AsyncOpenAI | None = None,
    dataset_dir: Path | None = None,
) -> Target:
    """A Banking77 target in a registry of its own (so several can coexist in one process)."""
    agent = Banking77Agent(client or settings.client(), settings, sample.labels(DATA_DIR))

    async def classify(task: Task, candidate: Candidate) -> AgentResult:
        return await agent.run(task, candidate)

    optimize(**target_options(settings, sample, dataset_dir=dataset_dir), registry=Registry())(
        classify
    )
    return classify.__gepa_target__  # type: ignore[attr-defined,no-any-return]


def create_banking77_app(
    *,
    settings: StudentSettings | None = None,
    sample: SampleConfig | None = None,
    client: AsyncOpenAI | None = None,
    token: str | None = None,
    dataset_dir: Path | None = None,
) -> Starlette:
    """The Banking77 container as an ASGI app; settings and sizes default to the env."""
    target = build_target(
        settings or StudentSettings.from_env(),
        sample or SampleConfig.from_env(),
        client=client,
        dataset_dir=dataset_dir,
    )
    return create_app(target, token=token)
