"""The Banking77 container for ``gepa-runtime container examples/banking77/app.py``.

This module is a composition root: importing it reads the environment (``GEPA_STUDENT_MODEL``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``B77_TRAIN_SIZE``, ``B77_HOLDOUT_SIZE``,
``B77_SEED``, ``B77_INTENTS``), writes the sampled seeds to a cache folder and registers the target, which
is what the CLI looks for. Library code and tests use ``create_banking77_app`` instead.
"""

from __future__ import annotations

from container import AgentResult, Candidate, Task, optimize
from examples.banking77.agent import Banking77Agent, StudentSettings
from examples.banking77.data import SampleConfig
from examples.banking77.program import target_options

__all__ = ["classify"]

_settings = StudentSettings.from_env()
_sample = SampleConfig.from_env()
_agent = Banking77Agent(_settings.client(), _settings, _sample.labels())


@optimize(**target_options(_settings, _sample))
async def classify(task: Task, candidate: Candidate) -> AgentResult:
    """Classify ``task.input`` with the candidate system prompt and the fixed label list."""
    return await _agent.run(task, candidate)
