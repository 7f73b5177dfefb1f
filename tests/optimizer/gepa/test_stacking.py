"""Stacking: children written at the same time replayed on one base, judged once on train.

The unit tests drive ``Stacking`` over the recording fakes (``parts.wired``): children wait
in the room on the base ``- ant``, a seed ``<label>-<i>`` passes when the prompt lists the
label. The whole runs after them check stacking inside the search.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from proposer import ProposalRequest
from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.fakes import look_alike_score, rule_score
from tests.optimizer.gepa.parts import SEEDS, wired
from tests.optimizer.gepa.runs import LABELS, on_the_baseline, whole_run, with_ant


def _poisoned(components: Mapping[str, str], seed: str) -> float:
    """``rule_score``, but a ``- poison`` line fails every item (an edit that only hurts)."""
    return 0.0 if "- poison" in components["system_prompt"] else rule_score(components, seed)


async def test_a_stack_replays_the_waiting_edits_on_their_base_in_the_order_they_were_asked() -> (
    None
):
    w = wired()
    base = await w.scored("- ant")
    bee = w.waiting(1, "- ant\n- bee", base)
    cat = w.waiting(2, "- ant\n- cat", base)
    assert await w.stacking.stack(cat)  # the second asked answered first: its turn
    (stack,) = w.events.of("stack")
    ids = [bee.child.candidate_id, cat.child.candidate_id]
    assert stack["children"] == ids and stack["onto"] == base
    record = w.state.candidates[stack["candidate_id"]]
    assert record.components["system_prompt"] == "- ant\n- bee\n- cat"
    assert record.parents == [base, *ids] and record.origin == "merge"


async def test_one_child_waiting_alone_is_no_stack() -> None:
    w = wired()
    base = await w.scored("- ant")
    alone = w.waiting(1, "- ant\n- bee", base)
    assert not await w.stacking.stack(alone)
    assert w.events.events == [] and not alone.done


async def test_a_stack_is_judged_once_on_train_and_its_children_never_alone() -> None:
    w = wired()
    base = await w.scored("- ant")
    entries = [w.waiting(n, f"- ant\n- {x}", base) for n, x in enumerate(("bee", "cat"), 1)]
    assert await w.stacking.stack(entries[0])
    stack = w.events.of("stack")[0]["candidate_id"]
    (gate,) = w.events.of("gate")
    assert gate["candidate_id"] == stack and gate["minibatch"] == list(SEEDS) and gate["accepted"]
    assert w.state.train_mean(stack) == 6 / 8 and stack in w.state.contenders
    assert sorted(w.queue.seeds_sent(stack)) == sorted(SEEDS)  # each train seed once
    children = {e.child.candidate_id for e in entries}
    assert not children & {*w.state.train, *w.state.minibatch, *w.state.contenders}
    assert not any(w.queue.seeds_sent(c) for c in children)
    assert all(e.done for e in entries)  # accepted with the stack: nobody gates them


async def test_a_stack_that_broke_seeds_is_restacked_without_the_child_to_blame() -> None:
    # One child adds bee; the other replaced the ant line by one that fixes nothing. Their
    # stack is scored first on a round of seeds its base solves; it broke ant's. The child
    # that removed a line, scored there alone, breaks them while the line it added does not:
    # it is to blame. The stack is dropped unscored on the rest of train, and the others
    # (the bee child alone) are judged on train against the base.
    w = wired()
    base = await w.scored("- ant")
    good, bad = w.waiting(1, "- ant\n- bee", base), w.waiting(2, "- zzz", base)
    assert await w.stacking.stack(good)
    good_id, bad_id = good.child.candidate_id, bad.child.candidate_id
    first, again = w.events.of("stack")
    (blame,) = w.events.of("blame")
    assert blame == {
        "iteration": 1,
        "candidate_id": first["candidate_id"],
        "broken": ["ant-0", "ant-1"],
        "suspects": [bad_id],
        "culprits": [bad_id],
        "early": True,
        "onto": base,
        # What it is blamed on: its edit alone broke ant's seeds; what it added alone, none.
        "edit_broke": {bad_id: ["ant-0", "ant-1"]},
        "added_broke": {bad_id: []},
    }
    assert first["candidate_id"] not in w.state.train
    assert w.queue.rounds_of(first["candidate_id"]) == [["ant-0", "ant-1", "bee-0", "bee-1"]]
    assert again["children"] == [good_id] and again["candidate_id"] == good_id
    assert good_id in w.state.contenders and w.state.train_mean(good_id) == 4 / 8
    assert bad_id not in w.state.train and good.done and bad.done


async def test_a_stack_that_only_trades_seeds_with_its_base_is_built_on_next() -> None:
    # ant and bee are look-alikes: the stack of the bee child and one that fixes nothing
    # wins bee's seeds and loses ant's, as good as its base on the mean. Gating each child
    # alone would find the same; the next proposals build on the stack, shown what it broke.
    w = wired(look_alike_score)
    base = await w.scored("- ant")
    entries = [w.waiting(1, "- ant\n- bee", base), w.waiting(2, "- ant\n- zzz", base)]
    assert await w.stacking.stack(entries[0])
    (stack,) = w.events.of("stack")
    assert w.followups.next() == (stack["candidate_id"], ["ant-0", "ant-1"])
    assert [g["candidate_id"] for g in w.events.of("gate")] == [stack["candidate_id"]]
    assert stack["candidate_id"] not in w.state.contenders
    assert all(e.done for e in entries)


async def test_a_stack_worse_than_its_base_is_dropped_and_its_children_are_not_stacked_again() -> (
    None
):
    w = wired(_poisoned)
    base = await w.scored("- ant")
    entries = [w.waiting(1, "- ant\n- cat", base), w.waiting(2, "- ant\n- poison", base)]
    assert not await w.stacking.stack(entries[0])  # the pipeline gates it alone next
    (stack,) = w.events.of("stack")
    assert stack["candidate_id"] in w.state.train
    assert stack["candidate_id"] not in w.state.contenders
    assert not any(e.done or e.stackable for e in entries)
    assert not await w.stacking.stack(entries[1])
    assert len(w.events.of("stack")) == 1


async def test_children_waiting_for_the_same_best_are_stacked_gated_and_scored_once(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline, each adding another label, come back at once.
    container = RuleContainer(program(LABELS))
    events = await on_the_baseline(tmp_path, container, delays=(0.0, 0.0, 0.0))
    stacks = [e.data for e in events if e.type == "stack"]
    assert stacks and len(stacks[0]["children"]) >= 2
    stack = stacks[0]
    gates = [e.data for e in events if e.type == "gate"]
    gated = [g["candidate_id"] for g in gates]
    # The stacked children were never gated or scored one by one; the stack was, once each.
    assert not set(stack["children"]) & set(gated)
    assert gated.count(stack["candidate_id"]) == 1
    assert next(g for g in gates if g["candidate_id"] == stack["candidate_id"])["accepted"]
    # It is judged on every train seed at once (no minibatch gate, no extension rounds).
    stack_gate = next(g for g in gates if g["candidate_id"] == stack["candidate_id"])
    assert sorted(stack_gate["minibatch"]) == sorted(program(LABELS)["seeds"]["train"])
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert not set(stack["children"]) & set(train)
    # Each stacked child adds one label to the best it was stacked on.
    onto = train[stack["onto"]]
    assert train[stack["candidate_id"]] == pytest.approx(
        onto + len(stack["children"]) / len(LABELS)
    )
    assert max(container.calls.values()) == 1


async def _two_on_ant(
    tmp_path: Path, container: RuleContainer, lines: tuple[str, str]
) -> list[Event]:
    """Two proposals on the ``- ant`` baseline, answered together, adding ``lines``; later
    proposals add the first label of the failures they are shown."""
    return await on_the_baseline(
        tmp_path,
        container,
        delays=(1.0, 0.0),
        pick=lambda labels, n: lines[n - 1] if n <= len(lines) else labels[0],
    )


async def test_a_stack_worse_than_its_base_leaves_each_child_to_its_own_gate(
    tmp_path: Path,
) -> None:
    # Two children written at once: one adds a label, the other a line that breaks every
    # item. Their stack is worse than the baseline on train; each child alone is then gated,
    # and only the good one is accepted.
    events = await _two_on_ant(
        tmp_path, RuleContainer(with_ant(LABELS), poison="poison"), ("cat", "poison")
    )
    stack = next(e.data for e in events if e.type == "stack")
    gates = {e.data["candidate_id"]: e.data for e in events if e.type == "gate"}
    assert not gates[stack["candidate_id"]]["accepted"]
    assert (
        gates[stack["candidate_id"]]["child_score"] < gates[stack["candidate_id"]]["parent_score"]
    )
    good, bad = stack["children"]
    assert gates[good]["accepted"]
    # The bad edit replayed on the new best is the stack's text again, known to be worse.
    assert bad not in gates or not gates[bad]["accepted"]
    scored = [e.data["candidate_id"] for e in events if e.type == "scored"]
    assert bad not in scored


async def test_a_stack_that_only_trades_seeds_is_built_on_next_not_split(tmp_path: Path) -> None:
    # Look-alikes: with ``- ant`` and ``- bee`` and no ``- ant_bee``, the one listed first
    # loses its items. One child adds ``bee`` (fixes bee, breaks ant), the other a line that
    # fixes nothing: their stack ties the baseline. No child is gated alone (each would only
    # repeat that); the next proposals build on the stack, shown the seeds it broke.
    container = RuleContainer(with_ant(LABELS), rivals={"ant": "bee", "bee": "ant"})
    events = await _two_on_ant(tmp_path, container, ("bee", "zzz"))
    stack = next(e.data for e in events if e.type == "stack")
    gates = [e.data for e in events if e.type == "gate"]
    stack_gate = next(g for g in gates if g["candidate_id"] == stack["candidate_id"])
    assert not stack_gate["accepted"]
    assert stack_gate["child_score"] == stack_gate["parent_score"]
    assert not {g["candidate_id"] for g in gates} & set(stack["children"])
    built_on = [
        e.data
        for e in events
        if e.type == "iteration" and e.data.get("parent") == stack["candidate_id"]
    ]
    assert built_on and {"ant-0", "ant-1"} & set(built_on[0]["minibatch"])
    scored = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert max(scored.values()) > scored[stack["onto"]]  # the disambiguation was found on it


async def test_a_stack_that_broke_seeds_is_stacked_again_without_the_child_to_blame(
    tmp_path: Path,
) -> None:
    # Two children written at once on the "- ant" baseline: one adds bee, the other drops
    # ant and adds a line that fixes nothing (an answer that made the text worse). Their
    # stack is scored first on the seeds its base solves (ant's two, and two more to fill a
    # round of four); it broke them, so the one whose edit removed a line is scored alone on
    # those, and the stack is dropped there, its other 8 train seeds unpaid.
    events = await on_the_baseline(
        tmp_path,
        RuleContainer(with_ant(LABELS)),
        delays=(1.0, 0.0),
        pick=lambda labels, n: "bee" if "bee" in labels else labels[0],
        drops=frozenset({2}),
        drop_adds="- zzz",
        config={"concurrency": 4},
    )
    good, bad = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")["candidate_id"]
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["candidate_id"] == stack and sorted(blame["broken"]) == ["ant-0", "ant-1"]
    assert blame["suspects"] == [bad] and blame["culprits"] == [bad]
    paid = [
        t["seed"]
        for e in events
        if e.type == "trials"
        for t in e.data["trials"]
        if t["candidate_id"] == stack and not t["cached"]
    ]
    assert {"ant-0", "ant-1"} <= set(paid) and len(paid) == 4
    assert blame["early"]
    assert stack not in {e.data["candidate_id"] for e in events if e.type == "scored"}
    # What is accepted next is the stack without it: ant kept, bee added.
    after = events[events.index(next(e for e in events if e.type == "blame")) :]
    accepted = next(e.data for e in after if e.type == "gate" and e.data["accepted"])
    assert accepted["candidate_id"] == good
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[good] == pytest.approx(2 / len(LABELS))


async def test_a_sibling_that_conflicted_only_with_the_culprit_joins_the_restack(
    tmp_path: Path,
) -> None:
    # Three children written at once on the "- ant" baseline. The first rewords the head,
    # drops ant and adds bee (it breaks ant's seeds); the second adds cat; the third words
    # the head another way and adds dog, so its edit conflicts with the first's and it is
    # left out of the stack. The first is to blame: the restack without it takes the third
    # too, rather than leaving it to be rebased and gated alone afterwards.
    def answer(request: ProposalRequest, n: int) -> str:
        head, *rest = request.parent.components["system_prompt"].splitlines()
        if n == 1:
            return "\n".join(["Reworded head.", *(x for x in rest if x != "- ant"), "- bee"])
        if n == 2:
            return "\n".join([head, *rest, "- cat"])
        return "\n".join(["Another head.", *rest, "- dog"])

    events = await on_the_baseline(
        tmp_path,
        RuleContainer(with_ant(LABELS)),
        delays=(1.0, 0.0, 0.0),
        script=answer,
        config={"concurrency": 4},
    )
    bad, good, other = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    first, restack = [e.data for e in events if e.type == "stack"][:2]
    assert sorted(first["children"]) == sorted([bad, good])
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["culprits"] == [bad]
    assert sorted(restack["children"]) == sorted([good, other])
    gate = next(e.data for e in events if e.type == "gate" and e.data["accepted"])
    assert gate["candidate_id"] == restack["candidate_id"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[restack["candidate_id"]] == pytest.approx(3 / len(LABELS))
    alone = {e.data.get("candidate_id") for e in events if e.type in ("gate", "rebase")}
    assert other not in alone


async def test_a_stack_whose_text_one_child_wrote_already_is_that_child(tmp_path: Path) -> None:
    # Two answers written at once on the baseline: one adds ant, the other ant and bee (a
    # model that fixed two things). Their stack is the second child's text: it is judged
    # as the stack and accepted, not refused as a duplicate (which left the first child
    # gated alone and dropped the second as already in the best when rebased on it).
    def answer(request: ProposalRequest, n: int) -> str:
        text = request.parent.components["system_prompt"]
        return f"{text}\n- ant" if n == 1 else f"{text}\n- ant\n- bee"

    events = await on_the_baseline(
        tmp_path, RuleContainer(program(LABELS)), delays=(0.5, 0.0), script=answer
    )
    one, both = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")
    assert stack["candidate_id"] == both and sorted(stack["children"]) == sorted([one, both])
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == both and gate["accepted"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[both] == pytest.approx(2 / len(LABELS))


async def test_a_stack_replays_its_children_in_the_order_they_were_asked(tmp_path: Path) -> None:
    # Two writers on the baseline add bee and cat; the second asked answers first, so its
    # child takes the acceptance turn. Its stack lists bee before cat all the same: which
    # answer came in first (a matter of timing) does not change the stack's text, its id or
    # what is asked of the student after it.
    proposer = ScriptedProposer(
        script=lambda request, n: (
            request.parent.components["system_prompt"]
            + f"\n- {('bee', 'cat')[n - 1] if n <= 2 else 'dog'}"
        )
    )
    first, second = proposer.hold(1), proposer.hold(2)

    async def second_answers_first() -> None:
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.5)  # answers that took a while: siblings are waited for
        second.set()
        await asyncio.sleep(0.02)
        first.set()

    answering = asyncio.create_task(second_answers_first())
    events: list[Event] = []
    await whole_run(
        tmp_path,
        RuleContainer(program(LABELS)),
        proposer,
        events,
        proposals_in_flight=2,
        max_idle_iterations=2,
    )
    await asyncio.wait_for(answering, 5)
    added = {e.data["candidate_id"]: e.data["diff"] for e in events if e.type == "candidate"}
    bee, cat = (
        next(c for c, diff in added.items() if diff.endswith(f"+- {x}\n")) for x in ("bee", "cat")
    )
    stack = next(e.data for e in events if e.type == "stack")
    assert stack["children"] == [bee, cat]
    text = added[stack["candidate_id"]]
    assert text.index("+- bee") < text.index("+- cat")


async def test_a_rewrite_whose_new_rule_trades_look_alike_seeds_is_not_to_blame(
    tmp_path: Path,
) -> None:
    # Look-alikes ant and bee on the "- ant" baseline. Two children written at once: the
    # first rewords the head and adds bee (a rewrite that keeps every rule), the second adds
    # cat. Their stack breaks ant's seeds, and the rewrite alone does too; but so does the
    # line it added, kept without the rewording: the break is the trade bee makes (the
    # items of the one listed first go to the other), not damage. Nobody is to blame; the
    # stack is accepted whole, and the next writers are shown the seeds it broke (their
    # feedback asks for "ant_bee"), not asked for bee again.
    def answer(request: ProposalRequest, n: int) -> str:
        head, *rest = request.parent.components["system_prompt"].splitlines()
        if n == 1:
            return "\n".join(["Reworded head.", *rest, "- bee"])
        if n == 2:
            return "\n".join([head, *rest, "- cat"])
        return "\n".join([head, *rest, "- ant_bee"])

    events = await on_the_baseline(
        tmp_path,
        RuleContainer(with_ant(LABELS), rivals={"ant": "bee", "bee": "ant"}),
        delays=(1.0, 0.0),
        script=answer,
        config={"concurrency": 4},
    )
    rewrite, cat = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stack = next(e.data for e in events if e.type == "stack")
    assert sorted(stack["children"]) == sorted([rewrite, cat])
    blame = next(e.data for e in events if e.type == "blame")
    assert blame["suspects"] == [rewrite] and blame["culprits"] == []
    assert sorted(blame["broken"]) == ["ant-0", "ant-1"]
    accepted = next(e.data for e in events if e.type == "gate" and e.data["accepted"])
    assert accepted["candidate_id"] == stack["candidate_id"]
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    assert train[stack["candidate_id"]] == pytest.approx(4 / 12)  # bee and cat; ant traded
    shown = [
        set(e.data["minibatch"])
        for e in events
        if e.type == "iteration" and e.data.get("parent") == stack["candidate_id"]
    ]
    assert any({"ant-0", "ant-1"} <= seeds for seeds in shown)
