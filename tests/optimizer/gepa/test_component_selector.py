"""The component selectors: which components a proposal may edit."""

from __future__ import annotations

from optimizer.gepa.strategies.component_selector import (
    AllComponentSelector,
    ComponentSelector,
    RoundRobinComponentSelector,
)

NAMES = ("system_prompt", "tool_description", "router_prompt")


def test_round_robin_edits_one_component_per_iteration_in_turn() -> None:
    selector = RoundRobinComponentSelector()
    assert [selector.select(i, "p", NAMES) for i in range(1, 5)] == [
        ("tool_description",),
        ("router_prompt",),
        ("system_prompt",),
        ("tool_description",),
    ]
    assert selector.select(7, "p", ("system_prompt",)) == ("system_prompt",)


def test_all_edits_every_component() -> None:
    assert AllComponentSelector().select(3, "p", NAMES) == NAMES
    assert isinstance(AllComponentSelector(), ComponentSelector)
