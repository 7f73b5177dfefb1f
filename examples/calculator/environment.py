"""``CalculatorEnvironment``: the calculator tool for the spec API's ``environment_factory``.

    result = await run_gepa(..., environment_factory=lambda sample: CalculatorEnvironment())

It offers the same tool (``TOOL_SCHEMA``) and answers a native tool call the way the
calculator agent does (``_native_call``): a bad expression, a wrong tool name or malformed
arguments become an error observation the model can correct. One instance per row, so no
call leaks between tasks; ``env.calls`` logs them.
"""

from __future__ import annotations

import json
from typing import Any

from examples.calculator.agent import _native_call
from examples.calculator.tools import TOOL_SCHEMA, CalculatorEnv

__all__ = ["CalculatorEnvironment"]


class CalculatorEnvironment:
    """One row's calculator: ``tools()`` for the model, ``call(name, arguments)`` to run one."""

    def __init__(self, max_calls: int = 8) -> None:
        self.env = CalculatorEnv(max_calls=max_calls)

    def tools(self) -> list[dict[str, Any]]:
        """The calculator as an OpenAI tool."""
        return [json.loads(json.dumps(TOOL_SCHEMA))]  # a copy: callers may not edit ours

    def call(self, name: str, arguments: str) -> str:
        """The observation for one call: the result, or ``Error: ...`` saying what to fix."""
        return _native_call(self.env, {"name": name, "arguments": arguments}).observation

    @property
    def calls(self) -> list[Any]:
        """Every call made so far, in order."""
        return self.env.calls
