"""The calculator container for ``gepa-runtime container examples/calculator/app.py``.

This module is a composition root: importing it reads the environment (``GEPA_STUDENT_MODEL``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``CALC_MAX_STEPS``, ``CALC_NATIVE_TOOLS``) and
registers the target, which is what the CLI looks for. The generic command does not know the
shipped splits: pass ``--splits-file examples/calculator/splits.json`` (or set
``GEPA_SPLITS_FILE``). Library code and tests use ``create_calculator_app`` instead.
"""

from __future__ import annotations

from container import AgentResult, Candidate, Task, optimize
from examples.calculator.agent import CalculatorAgent
from examples.calculator.program import target_options
from examples.calculator.settings import AgentSettings

__all__ = ["solve"]

_settings = AgentSettings.from_env()
_agent = CalculatorAgent(_settings.client(), _settings)


@optimize(**target_options(_settings))
async def solve(task: Task, candidate: Candidate) -> AgentResult:
    """Solve ``task.input["question"]`` with the candidate's template and the calculator."""
    return await _agent.run(task, candidate)
