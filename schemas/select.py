"""``--select``: the rule that picks the winner among the candidates, by what the team weighs.

- ``best``: the highest mean reward (the default);
- ``cheapest-within:DELTA``: the cheapest candidate whose mean reward is within ``DELTA`` of the
  best one's (``cheapest-within:0.02``: give up at most two points of a [0, 1] reward);
- ``best-under:OBJECTIVE=BOUND``: the highest mean reward among the candidates whose mean
  ``OBJECTIVE`` is at most ``BOUND``: ``cost=USD`` (student dollars per rollout),
  ``latency=MS`` (milliseconds per rollout), ``tokens=N`` (the prompt's length in tokens), or
  the name of an objective the container declares as minimised.

This module is the rule's syntax (a config field is checked when it is read); ranking
candidates under a rule is :mod:`optimizer.runtime.search.selection`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["BOUND_ALIASES", "SELECT_HELP", "SelectRule", "parse_select"]

# The short names of --select best-under, and the objective each one bounds.
BOUND_ALIASES: dict[str, str] = {
    "cost": "cost_usd",
    "latency": "latency_ms",
    "tokens": "prompt_tokens",
}
SELECT_HELP = (
    "give --select best, --select cheapest-within:DELTA (e.g. cheapest-within:0.02) or "
    "--select best-under:cost=USD, best-under:latency=MS or best-under:tokens=N"
)


@dataclass(frozen=True)
class SelectRule:
    """A parsed ``--select``: ``kind``, and its ``delta`` or its ``objective`` and ``bound``."""

    kind: Literal["best", "cheapest-within", "best-under"] = "best"
    delta: float = 0.0  # cheapest-within's
    objective: str | None = None  # best-under's, by its full name (cost_usd, ...)
    bound: float = math.inf  # best-under's

    @property
    def is_best(self) -> bool:
        """Whether this is today's rule, the highest reward alone."""
        return self.kind == "best"

    @property
    def weighed(self) -> str | None:
        """The objective this rule weighs besides reward (``None`` for ``best``)."""
        if self.kind == "cheapest-within":
            return "cost_usd"
        return self.objective

    def __str__(self) -> str:
        if self.kind == "cheapest-within":
            return f"cheapest-within:{self.delta:g}"
        if self.kind == "best-under":
            short = {v: k for k, v in BOUND_ALIASES.items()}.get(str(self.objective))
            return f"best-under:{short or self.objective}={self.bound:g}"
        return "best"


def _number(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{spec!r}: {what} {text!r} is not a number; {SELECT_HELP}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{spec!r}: {what} must be a finite number >= 0; {SELECT_HELP}")
    return value


def parse_select(spec: str) -> SelectRule:
    """The rule ``spec`` names; ``ValueError`` naming what is wrong and the forms it takes."""
    text = spec.strip()
    kind, colon, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "best" and not colon:
        return SelectRule()
    if kind == "cheapest-within" and arg:
        return SelectRule("cheapest-within", delta=_number(arg.strip(), "DELTA", spec))
    if kind == "best-under" and arg:
        name, equals, bound = arg.partition("=")
        name = name.strip()
        if not equals or not name:
            raise ValueError(f"{spec!r}: best-under takes OBJECTIVE=BOUND; {SELECT_HELP}")
        objective = BOUND_ALIASES.get(name.lower(), name)
        return SelectRule("best-under", objective=objective, bound=_number(bound, "BOUND", spec))
    raise ValueError(f"{spec!r} is not a selection rule; {SELECT_HELP}")
