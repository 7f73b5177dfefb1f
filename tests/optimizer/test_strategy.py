"""The runtime runs whatever search it is handed (``optimizer.runtime.search.strategy``).

A recording method stands in for GEPA behind the runtime's ``Runner``; the rule
container behind ``httpx.MockTransport`` and a real workspace file. The built-in registry
is ``optimizer.searches.SEARCHES``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from optimizer.gepa import GepaMethod
from optimizer.mipro import MiproMethod
from optimizer.runtime.lifecycle.runner import Runner
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchStart
from optimizer.searches import SEARCHES
from schemas import Event, RunConfig, UserError
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from workspace import Workspace

LABELS = ["ant", "bee", "cat", "cow"]


def _config(**extra: Any) -> RunConfig:
    return RunConfig(
        containers=["http://rules"],
        reflection_model="scripted",
        max_metric_calls=200,
        **extra,
    )


@dataclass
class _OneCandidate:
    """A search that scores one hand-written candidate on the minibatch and stops."""

    deps: SearchDeps
    start: SearchStart

    async def run(self) -> str:
        text = self.start.program.components[0].text + "\n- ant"
        name = self.start.program.components[0].name
        results = await self.deps.queue.evaluate("hand", {name: text}, self.deps.state.train_seeds)
        return f"recorded search scored {len(results)} seeds"


@dataclass
class _Recording:
    """A method that records what the runtime asked of it."""

    calls: list[str] = field(default_factory=list)
    starts: list[SearchStart] = field(default_factory=list)
    refuse: bool = False
    section: dict[str, Any] | None = None  # what it adds to the evidence packet

    def prepare(self, config: RunConfig) -> None:
        self.calls.append("prepare")
        if self.refuse:
            raise UserError("the recording method is not installed")

    def starts_on_first_round(
        self, config: RunConfig, first_round: Mapping[str, SeedResult]
    ) -> bool:
        return False

    def build(self, deps: SearchDeps, start: SearchStart) -> _OneCandidate:
        self.calls.append("build")
        self.starts.append(start)
        return _OneCandidate(deps, start)

    async def without_search(self, deps: SearchDeps, start: SearchStart) -> str:
        self.calls.append("without_search")
        return ""

    def evidence_section(self, state: SearchState, best_id: str) -> dict[str, Any] | None:
        self.calls.append("evidence_section")
        return None if self.section is None else {**self.section, "best": best_id}

    def report_lines(self, section: Mapping[str, Any]) -> list[str]:
        self.calls.append("report_lines")
        return ["## Recorded", "", f"best {section['best']}, note {section['note']}"]

    def decisions(self, events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
        self.calls.append("decisions")
        return {"hand": [{"kind": "noted", "seq": 1, "text": "read by the recording method"}]}


async def test_the_runtime_runs_the_search_it_is_handed(tmp_path: Path) -> None:
    container, proposer, method = RuleContainer(program(LABELS)), ScriptedProposer(), _Recording()
    async with container.client() as http:
        result = await Runner({"gepa": method}).run_optimization(
            _config(),
            workspace=tmp_path / "ws",
            proposer=proposer,
            http=http,
        )
    assert method.calls == ["prepare", "build", "evidence_section", "decisions"]
    assert "gepa" not in result.evidence  # a method with nothing to add adds no section
    (start,) = method.starts
    assert start.baseline_id == result.baseline_candidate_id
    assert sorted(start.baseline_train) == sorted(program(LABELS)["seeds"]["train"])
    assert (
        result.evidence["stop_reason"]
        == f"recorded search scored {len(start.baseline_train)} seeds"
    )
    assert proposer.seen == []  # GEPA never ran: nothing asked the reflection model


async def test_the_method_adds_its_own_part_to_the_evidence_and_the_report(
    tmp_path: Path,
) -> None:
    container, method = RuleContainer(program(LABELS)), _Recording(section={"note": "n1"})
    async with container.client() as http:
        result = await Runner({"gepa": method}).run_optimization(
            _config(), workspace=tmp_path / "ws", proposer=ScriptedProposer(), http=http
        )
    assert method.calls[-3:] == ["evidence_section", "decisions", "report_lines"]
    best = result.best_candidate_id
    assert result.evidence["gepa"] == {"note": "n1", "best": best}  # under the method's name
    assert list(result.evidence)[-1] == "gepa"
    report = (result.evidence_dir / "report.md").read_text()
    assert f"## Recorded\n\nbest {best}, note n1\n" in report
    assert report.index("## Recorded") < report.index("## Usage")


async def test_a_method_the_registry_lacks_is_refused_before_a_run_is_stored(
    tmp_path: Path,
) -> None:
    with pytest.raises(UserError, match=r"unknown --method 'mipro'; this runtime knows: gepa"):
        await Runner({"gepa": _Recording()}).run_optimization(
            _config(method="mipro"), workspace=tmp_path / "ws"
        )
    async with Workspace(tmp_path / "ws") as ws:
        assert await ws.list_runs() == []


async def test_a_method_that_cannot_run_fails_before_the_baseline_is_paid(
    tmp_path: Path,
) -> None:
    container, method = RuleContainer(program(LABELS)), _Recording(refuse=True)
    async with container.client() as http:
        with pytest.raises(UserError, match="the recording method is not installed"):
            await Runner({"gepa": method}).run_optimization(
                _config(), workspace=tmp_path / "ws", http=http
            )
    assert method.calls == ["prepare"]
    assert sum(container.calls.values()) == 0  # no rollout was sent


def test_the_built_in_registry_names_both_methods() -> None:
    assert set(SEARCHES) == {"gepa", "mipro"}
    assert isinstance(SEARCHES["gepa"], GepaMethod)
    assert isinstance(SEARCHES["mipro"], MiproMethod)
