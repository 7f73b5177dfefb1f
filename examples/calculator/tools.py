"""The calculator tool: a safe arithmetic evaluator and the per-task environment that logs calls.

``Calculator.evaluate`` walks the ``ast`` of one expression and allows only numbers, the
operators ``+ - * / // % **``, unary signs, parentheses and the functions ``round``, ``abs``,
``min``, ``max`` and ``sqrt``. Names, attributes, other calls, strings, huge powers and long
expressions are refused with a message written for the model, because a refusal is an
observation the agent can correct, not a crash. ``CalculatorEnv`` is the tool environment of
one task: it records every call and caps how many there are.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schemas import GepaError

__all__ = [
    "TOOL_NAME",
    "TOOL_SCHEMA",
    "Calculator",
    "CalculatorEnv",
    "CalculatorError",
    "ToolCall",
    "format_number",
]

TOOL_NAME = "calculator"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Evaluate one arithmetic expression, e.g. 12 * 3.5 or (250 - 200) / 200 * 100. "
            "Operators: + - * / // % ** and parentheses; functions: round, abs, min, max, sqrt."
        ),
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "the expression"}},
            "required": ["expression"],
        },
    },
}

Number = int | float
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "round": round,
    "abs": abs,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
}
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# What small models type instead of Python operators; mapping them costs nothing.
_SPELLINGS = {"×": "*", "÷": "/", "^": "**", "$": "", "−": "-"}


class CalculatorError(GepaError):
    """An expression the calculator refuses or cannot evaluate; the message is for the model."""


def format_number(value: Number) -> str:
    """A number as short text: ``46224``, ``4458.95`` (12 significant digits, no float noise)."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


@dataclass(frozen=True)
class Calculator:
    """Evaluate arithmetic safely; ``max_digits`` bounds every intermediate result."""

    max_chars: int = 200
    max_digits: int = 100

    def evaluate(self, expression: str) -> Number:
        """The value of ``expression``, or ``CalculatorError`` saying what to change."""
        text = expression.strip().strip("`").strip()
        for spelled, python in _SPELLINGS.items():
            text = text.replace(spelled, python)
        if not text:
            raise CalculatorError("empty expression; write e.g. 12 * 3.5")
        if len(text) > self.max_chars:
            raise CalculatorError(
                f"expression is {len(text)} characters, over the limit of {self.max_chars}; "
                "split it into smaller steps"
            )
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            raise CalculatorError(
                f"cannot parse {text!r}; use numbers, + - * / ** and parentheses, e.g. 12 * 3.5"
            ) from None
        if any(isinstance(node, ast.Tuple) for node in ast.walk(tree)):
            raise CalculatorError(_comma_refusal(text))
        return self._eval(tree.body)

    def _eval(self, node: ast.AST) -> Number:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise CalculatorError(f"{node.value!r} is not a number")
            return self._bounded(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
            value = self._eval(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self._eval(node.left), self._eval(node.right)
            if isinstance(node.op, ast.Pow):
                self._check_power(left, right)
            return self._checked(_BINARY[type(node.op)], left, right)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise CalculatorError(_refusal(node))

    def _call(self, node: ast.Call) -> Number:
        fn = _FUNCTIONS.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if fn is None or node.keywords:
            allowed = ", ".join(_FUNCTIONS)
            raise CalculatorError(f"only these functions are allowed: {allowed}")
        return self._checked(fn, *(self._eval(arg) for arg in node.args))

    def _check_power(self, base: Number, exponent: Number) -> None:
        # Estimate the size before computing: 9 ** 9 ** 9 must be refused, not attempted.
        if abs(base) > 1 and abs(exponent) * math.log10(abs(base)) > self.max_digits:
            raise CalculatorError(f"result of {base} ** {exponent} is too large")

    def _checked(self, fn: Callable[..., Any], *args: Number) -> Number:
        try:
            value = fn(*args)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise CalculatorError(f"cannot compute: {exc}") from None
        return self._bounded(value)

    def _bounded(self, value: Any) -> Number:
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if isinstance(value, float) and not math.isfinite(value):
            raise CalculatorError("the result is too large")
        if isinstance(value, int) and abs(value) >= 10**self.max_digits:
            raise CalculatorError(f"the result has more than {self.max_digits} digits")
        return value  # type: ignore[no-any-return]


def _refusal(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"unknown name {node.id!r}; use only numbers (no variables or units)"
    if isinstance(node, ast.Attribute):
        return "attributes (x.y) are not allowed; use only numbers and operators"
    return f"{type(node).__name__} is not allowed; use numbers, + - * / // % ** and parentheses"


def _comma_refusal(text: str) -> str:
    # Quote the model's own number: an example number would end up in its answer.
    grouped = _THOUSANDS.search(text)
    if grouped is None:
        return "commas are only allowed between the arguments of min, max and round"
    number = grouped.group()
    return f"commas are not allowed in numbers: write {number.replace(',', '')}, not {number}"


@dataclass(frozen=True)
class ToolCall:
    """One calculator call: the expression and either its result or the error."""

    expression: str
    result: str | None = None
    error: str | None = None

    @property
    def observation(self) -> str:
        """What the model sees: the result, or ``Error: ...``."""
        return self.result if self.result is not None else f"Error: {self.error}"

    def as_trace(self) -> dict[str, Any]:
        """The call as an entry of the rollout trace's ``tool_calls``."""
        return {
            "name": TOOL_NAME,
            "arguments": {"expression": self.expression},
            "result": self.result,
            "error": self.error,
        }


@dataclass
class CalculatorEnv:
    """The tool environment of one task: a fresh one per rollout, so no call leaks between tasks."""

    calculator: Calculator = field(default_factory=Calculator)
    max_calls: int = 8
    calls: list[ToolCall] = field(default_factory=list)

    def call(self, expression: str) -> ToolCall:
        """Evaluate ``expression`` (or refuse it past ``max_calls``) and log the call."""
        if len(self.calls) >= self.max_calls:
            call = ToolCall(
                expression,
                error=f"call limit of {self.max_calls} reached; give your Answer now",
            )
        else:
            try:
                call = ToolCall(
                    expression, result=format_number(self.calculator.evaluate(expression))
                )
            except CalculatorError as exc:
                call = ToolCall(expression, error=str(exc))
        self.calls.append(call)
        return call

    def reject(self, expression: str, error: str) -> ToolCall:
        """Log a call that never reached the calculator (a wrong tool name, bad arguments)."""
        call = ToolCall(expression, error=error)
        self.calls.append(call)
        return call
