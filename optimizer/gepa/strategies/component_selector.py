"""Component selector: which components of a multi-component program a proposal may edit.

A program may expose several components (a system prompt, a tool description, a router
prompt). GEPA's reflective mutation edits some of them at a time; ``--component-selection``
chooses which:

- ``round_robin`` (the default): one component per proposal, in turn by iteration number;
- ``all``: every component in every proposal.

A one-component program is edited whole by either. Any object with a
``select(iteration, parent_id, components) -> names`` method is a component selector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "COMPONENT_SELECTORS",
    "AllComponentSelector",
    "ComponentSelector",
    "RoundRobinComponentSelector",
]


@runtime_checkable
class ComponentSelector(Protocol):
    """Chooses the components the proposal of one iteration may edit."""

    def select(self, iteration: int, parent_id: str, components: Sequence[str]) -> tuple[str, ...]:
        """Names out of ``components`` (the program's, in its order); at least one."""
        ...


class RoundRobinComponentSelector:
    """One component per proposal: the iteration number picks it, in the program's order."""

    def select(self, iteration: int, parent_id: str, components: Sequence[str]) -> tuple[str, ...]:
        """See the class docstring."""
        names = tuple(components)
        return (names[iteration % len(names)],) if len(names) > 1 else names


class AllComponentSelector:
    """Every component, in every proposal."""

    def select(self, iteration: int, parent_id: str, components: Sequence[str]) -> tuple[str, ...]:
        """See the class docstring."""
        return tuple(components)


COMPONENT_SELECTORS = ("round_robin", "all")
