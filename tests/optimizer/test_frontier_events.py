"""The frontier as a run shows it (events, evidence, report): a seed nobody solved is no win."""

from __future__ import annotations

from pathlib import Path

from optimizer.searches import run_optimization
from schemas import Event, RunConfig
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program


async def test_seeds_nobody_solved_are_misses_in_events_evidence_and_report(
    tmp_path: Path,
) -> None:
    # The baseline knows no label (0 everywhere); the only child adds "ant": it solves the two
    # ant seeds and ties the baseline at 0 on the four others. It must not "win" those.
    container = RuleContainer(program(["ant", "bee", "cat"]))
    frontiers: list[dict[str, object]] = []

    def listen(event: Event) -> None:
        if event.type == "frontier":
            frontiers.append(event.data)

    config = RunConfig(
        containers=["http://rules"],
        reflection_model="scripted",
        max_metric_calls=60,
        minibatch_size=6,
        max_idle_iterations=2,
        use_merge=False,
        proposals_in_flight=1,
    )
    async with container.client() as http:
        result = await run_optimization(
            config, workspace=tmp_path / "ws", proposer=ScriptedProposer(fixed_label="ant"),
            http=http, on_event=listen,
        )  # fmt: skip
    assert result.status == "completed"
    child = result.best_candidate_id
    assert child != result.baseline_candidate_id
    unsolved = {"bee-0", "bee-1", "cat-0", "cat-1"}
    assert frontiers, "the child's train evaluation announces the frontier"
    last = frontiers[-1]
    assert last["winners"] == {
        "ant-0": [child],
        "ant-1": [child],
        **{seed: [] for seed in sorted(unsolved, key=["bee-0", "bee-1", "cat-0", "cat-1"].index)},
    }
    assert last["coverage"] == {child: 2 / 6}
    assert (last["covered"], last["seeds"]) == (2, 6)
    frontier = result.evidence["frontier"]
    assert frontier["coverage"] == {child: 2 / 6}
    assert (frontier["covered"], frontier["seeds"]) == (2, 6)
    assert all(frontier["train_seeds"][seed] == [] for seed in unsolved)
    report = (result.evidence_dir / "report.md").read_text()
    assert "2/6 train seeds covered" in report
    assert "| bee-0 | - (nobody solved it) |" in report
