"""Merging: a text merge or the proposer's, gated against both parents, then scored."""

from __future__ import annotations

import random
from pathlib import Path

from optimizer.gepa.search import GepaSearch
from optimizer.gepa.strategies import strategies_for
from optimizer.runtime.budget import Budget
from optimizer.runtime.deps import SearchDeps
from optimizer.runtime.events import EventSink
from optimizer.runtime.state import SearchState
from proposer import ComponentSpec
from schemas import CandidateRecord, Event, RunConfig, candidate_id_for, content_hash
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, whole_run
from workspace import Workspace


async def test_merges_pair_branches_only_and_a_tie_is_not_accepted(tmp_path: Path) -> None:
    # Parallel children rewrite the same first line, so rebasing them conflicts and sibling
    # branches stay on the frontier; merges then combine branches, never a line with itself.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(
        pick=lambda labels, n: labels[(n - 1) % len(labels)], conflicting=True
    )
    events: list[Event] = []
    await whole_run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=3,
        minibatch_size=2 * len(LABELS),
        use_merge=True,
        max_idle_iterations=3,
    )
    rebases = [e.data for e in events if e.type == "rebase"]
    assert any(r.get("reason") == "conflict" for r in rebases)
    merges = [e.data["merge"] for e in events if e.type == "iteration" and "merge" in e.data]
    assert merges and proposer.merges
    parents = {e.data["candidate_id"]: e.data["parents"] for e in events if e.type == "candidate"}

    def ancestors(cid: str) -> set[str]:
        out, todo = set(), list(parents.get(cid, []))
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo += parents.get(p, [])
        return out

    for a, b in merges:
        assert a not in ancestors(b) and b not in ancestors(a)
    merged = {cid for cid, ps in parents.items() if len(ps) == 2}
    gates = [e.data for e in events if e.type == "gate" and e.data["candidate_id"] in merged]
    assert gates
    for gate in gates:
        # A merge must beat its best parent strictly to be scored on train.
        assert gate["accepted"] == (gate["child_score"] > gate["parent_score"])


async def test_a_clean_text_merge_on_the_common_ancestor_needs_no_reflection_call(
    tmp_path: Path,
) -> None:
    base = {"system_prompt": "Answer with the label."}
    a = {"system_prompt": "Answer with the label.\n- ant"}
    b = {"system_prompt": "Answer with the label.\n- bee"}
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.create_run(RunConfig(containers=["http://rules"]))
        state = SearchState(train_seeds=("ant-0", "bee-0"))
        records = {}
        for name, comps, parent in (("base", base, []), ("a", a, ["x"]), ("b", b, ["x"])):
            cid = candidate_id_for(comps)
            parent_ids = [records["base"].candidate_id] if parent else []
            records[name] = CandidateRecord(
                run_id=run.run_id,
                candidate_id=cid,
                content_hash=content_hash(comps),
                components=comps,
                parents=parent_ids,
                origin="mutation" if parent else "seed",
            )
            state.add(records[name])
        proposer = ScriptedProposer()

        async def checkpoint() -> None:
            return None

        deps = SearchDeps(
            config=RunConfig(containers=["http://rules"]),
            run_id=run.run_id,
            workspace=ws,
            queue=None,  # type: ignore[arg-type]  # a text merge sends no rollout
            proposer=proposer,
            budget=Budget(),
            events=EventSink(ws, run.run_id),
            rng=random.Random(0),
            state=state,
            components=(ComponentSpec("system_prompt", "prompt"),),
            description="",
            checkpoint=checkpoint,
            proposer_cost=lambda: 0.0,
        )
        search = GepaSearch(deps, strategies_for(deps))
        merged = await search.merging.text_merge(1, records["a"], records["b"])
    assert merged is not None and proposer.merges == [] and proposer.seen == []
    assert merged.components["system_prompt"] == "Answer with the label.\n- ant\n- bee"
    assert merged.parents == [records["a"].candidate_id, records["b"].candidate_id]
    assert merged.origin == "merge" and "no reflection call" in merged.rationale
