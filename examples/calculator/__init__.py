"""A tool-using ReAct agent (arithmetic word problems + a calculator) as a task container.

Serve it with ``python -m examples.calculator`` or
``gepa-runtime container examples/calculator/app.py --splits-file
examples/calculator/splits.json``; build it in-process with ``create_calculator_app``.
"""

from examples.calculator.agent import CalculatorAgent
from examples.calculator.environment import CalculatorEnvironment
from examples.calculator.program import (
    BASELINE,
    DATASET,
    PROGRAM_ID,
    SPLITS_FILE,
    build_target,
    create_calculator_app,
    target_options,
)
from examples.calculator.protocol import (
    Reply,
    first_number,
    last_number,
    normalize_number,
    parse_reply,
)
from examples.calculator.settings import AgentSettings
from examples.calculator.tools import (
    TOOL_NAME,
    TOOL_SCHEMA,
    Calculator,
    CalculatorEnv,
    CalculatorError,
    ToolCall,
    format_number,
)
from examples.calculator.verifier import CalculatorVerifier

__all__ = [
    "BASELINE",
    "DATASET",
    "PROGRAM_ID",
    "SPLITS_FILE",
    "TOOL_NAME",
    "TOOL_SCHEMA",
    "AgentSettings",
    "Calculator",
    "CalculatorAgent",
    "CalculatorEnv",
    "CalculatorEnvironment",
    "CalculatorError",
    "CalculatorVerifier",
    "Reply",
    "ToolCall",
    "build_target",
    "create_calculator_app",
    "first_number",
    "format_number",
    "last_number",
    "normalize_number",
    "parse_reply",
    "target_options",
]
