"""Why each candidate was kept or dropped, as GEPA's events tell it (``GepaMethod.decisions``).

A pure reading of a run's event log, so a finished run answers as well as a live one. Each
candidate gets its decisions in the order they were logged, each a dict::

    {"kind": "gate", "seq": 41, "ts": 1718000000.0, "text": "passed its gate against ...",
     "outcome": "passed the gate", ...the numbers it rests on}

``kind`` is one of ``created`` (how it was made and what its proposal was shown), ``gate``,
``stack``, ``stacked``, ``blame``, ``rebase``, ``regate``, ``skipped``, ``verdict`` (what its
train scores made of it) and ``settled``. ``outcome``, where present, is what the candidate
is after that decision; the last one is its decision (:mod:`optimizer.runtime.results.why`
adds the runtime's own: scores, a person's actions, the winner).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from schemas import Event

__all__ = ["gepa_decisions"]

Decision = dict[str, Any]


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3g}"


def _seeds(seeds: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(seeds[:most])
    return shown + (f" and {len(seeds) - most} more" if len(seeds) > most else "")


class _Reader:
    """Folds the events in order; ``out`` holds each candidate's decisions."""

    def __init__(self) -> None:
        self.out: dict[str, list[Decision]] = defaultdict(list)
        self.iterations: dict[int, Mapping[str, Any]] = {}
        self.stacks: dict[str, Mapping[str, Any]] = {}  # stack candidate -> its stack event
        self.event: Event | None = None

    def add(
        self, cid: str, kind: str, text: str, outcome: str | None = None, **numbers: Any
    ) -> None:
        assert self.event is not None
        entry: Decision = {"kind": kind, "seq": self.event.seq, "ts": self.event.ts, "text": text}
        if outcome is not None:
            entry["outcome"] = outcome
        self.out[cid].append({**entry, **numbers})

    def read(self, event: Event) -> None:
        self.event = event
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event.data)


def _iteration(r: _Reader, d: Mapping[str, Any]) -> None:
    r.iterations[int(d.get("iteration", 0))] = d


def _created(r: _Reader, d: Mapping[str, Any]) -> None:
    cid, it = str(d["candidate_id"]), int(d.get("iteration") or 0)
    parents, mode = list(d.get("parents") or []), d.get("mode")
    shown = r.iterations.get(it, {})
    numbers: dict[str, Any] = {"iteration": it, "parents": parents, "mode": mode}
    if d.get("evaluated") is False:
        text = "a smoke proposal from the baseline's train rollouts, never evaluated"
    elif mode == "text-merge":  # made without a reflection call: its rationale says how
        text = str(d.get("rationale") or "derived without a reflection call").split(". ")[0]
    elif shown.get("merge"):
        numbers["minibatch"] = list(shown.get("minibatch") or [])
        text = (
            f"a merge of {' and '.join(parents)} written by the reflection model ({mode}) in "
            f"iteration {it}, shown the seeds where they differ: {_seeds(numbers['minibatch'])}"
        )
    else:
        numbers["minibatch"] = list(shown.get("minibatch") or [])
        numbers["context"] = list(shown.get("context") or [])
        text = (
            f"written by the reflection model ({mode}) in iteration {it} on "
            f"{', '.join(parents) or 'no parent'}, shown the minibatch "
            f"{_seeds(numbers['minibatch']) or '-'}"
            + (f" and {len(numbers['context'])} other failures" if numbers["context"] else "")
        )
    r.add(cid, "created", text, "not evaluated", **numbers)


def _gate(r: _Reader, d: Mapping[str, Any]) -> None:
    cid, accepted = str(d["candidate_id"]), bool(d.get("accepted"))
    parent = d.get("parent")
    against = " and ".join(parent) if isinstance(parent, list) else str(parent)
    seeds = list(d.get("minibatch") or [])
    better, worse = list(d.get("better") or []), list(d.get("worse") or [])
    where = "every train seed" if d.get("on_train") else f"{len(seeds)} seeds"
    score = f"{_fmt(d.get('parent_score'))} -> {_fmt(d.get('child_score'))} on {where}"
    if accepted:
        text = f"passed its gate against {against}: {score}"
        text += f"; better on {_seeds(better)}" if better and not d.get("weighed") else ""
        outcome = "passed the gate"
    else:
        text = f"rejected by the gate against {against}: {score}"
        text += f"; worse on {_seeds(worse)}" if worse else "; better on no seed"
        outcome = "rejected by the gate"
    if d.get("weighed"):  # the --select rule decided, not the seeds
        text = text.split(";")[0] + f"; --select weighed it: {d['weighed']}"
    numbers = {k: d.get(k) for k in ("parent", "parent_score", "child_score", "accepted")}
    r.add(cid, "gate", text, outcome, seeds=seeds, better=better, worse=worse, **numbers)


def _stack(r: _Reader, d: Mapping[str, Any]) -> None:
    cid, children, onto = str(d["candidate_id"]), list(d.get("children") or []), d.get("onto")
    r.stacks[cid] = d
    if not any(x["kind"] == "created" for x in r.out.get(cid, [])):  # its text existed before
        r.add(
            cid,
            "stack",
            f"the edits of {', '.join(children)} (written at the same time) stacked on {onto}",
            children=children,
            onto=onto,
        )
    for child in (c for c in children if c != cid):
        others = [c for c in children if c != child]
        r.add(
            child,
            "stacked",
            f"its edit was stacked with {', '.join(others)} on {onto} into {cid}, judged once",
            f"stacked into {cid}",
            stack=cid,
            onto=onto,
        )


def _blame(r: _Reader, d: Mapping[str, Any]) -> None:
    stack, broken = str(d["candidate_id"]), list(d.get("broken") or [])
    onto = d.get("onto") or r.stacks.get(stack, {}).get("onto", "its base")
    culprits = list(d.get("culprits") or [])
    edits, added = d.get("edit_broke") or {}, d.get("added_broke") or {}
    early = bool(d.get("early"))
    r.add(
        stack,
        "blame",
        f"broke {_seeds(broken)} that {onto} solved; to blame: {', '.join(culprits) or 'none'}"
        + ("; dropped before the rest of its train evaluation" if early and culprits else ""),
        "dropped by stacking" if early and culprits else None,
        broken=broken,
        culprits=culprits,
    )
    for suspect in d.get("suspects") or []:
        mine, own = list(edits.get(suspect, [])), list(added.get(suspect, []))
        if suspect in culprits:
            text = (
                f"dropped from stack {stack}: its edit alone on {onto} broke "
                f"{_seeds(mine or broken)}, which the lines it added alone did not"
            )
            r.add(suspect, "blame", text, "dropped by stacking", stack=stack, broke=mine)
        else:
            text = f"suspected in stack {stack} (it removed or reworded lines) and cleared" + (
                f": the lines it added alone broke {_seeds(own)} too (a trade)" if own else ""
            )
            r.add(suspect, "blame", text, stack=stack, broke=mine)


def _rebase(r: _Reader, d: Mapping[str, Any]) -> None:
    cid, onto = str(d["candidate_id"]), d.get("onto")
    if d.get("dropped") or not d.get("applied"):
        why = "conflicts with" if d.get("reason") == "conflict" else "is already in"
        text = f"dropped: written on an older best, its edit {why} the new best {onto}"
        r.add(cid, "rebase", text, "dropped at rebase", onto=onto, reason=d.get("reason"))
        return
    rebased = d.get("rebased")
    text = f"written on an older best: its edit was replayed on the new best {onto} as {rebased}"
    r.add(cid, "rebase", text, f"rebased as {rebased}", onto=onto, rebased=rebased)


def _regate(r: _Reader, d: Mapping[str, Any]) -> None:
    r.add(
        str(d["candidate_id"]),
        "regate",
        f"written again in iteration {d.get('iteration')} on {d.get('parent')}: gated again",
        iteration=d.get("iteration"),
    )


def _skipped(r: _Reader, d: Mapping[str, Any]) -> None:
    if d.get("candidate_id"):
        r.add(str(d["candidate_id"]), "skipped", f"not gated: {d.get('reason')}", "not gated")


def _verdict(r: _Reader, d: Mapping[str, Any]) -> None:
    cid, against = str(d["candidate_id"]), " and ".join(d.get("against") or [])
    theirs = "/".join(_fmt(m) for m in d.get("against_means") or [])
    means = f"train {_fmt(d.get('mean'))} against {against}'s {theirs}"
    if d.get("held_back"):
        text = (
            f"held back as an unproven deletion ({means}): its edit only deletes text and it "
            "beat its parent by less than two seeds on the seeds its gate did not pick"
        )
        outcome = "held back (unproven deletion)"
    elif d.get("perfect"):
        text, outcome = f"full marks on every train seed ({means}): the search stops", "accepted"
    elif d.get("lateral"):
        text = f"ties its parent by trading seeds ({means}): the next proposals build on it"
        outcome = "accepted (lateral: built on next)"
    else:
        text, outcome = f"accepted: {means}", "accepted"
    numbers = {k: d.get(k) for k in ("mean", "against_means", "held_back", "lateral", "perfect")}
    r.add(cid, "verdict", text, outcome, against=d.get("against"), **numbers)


def _settled(r: _Reader, d: Mapping[str, Any]) -> None:
    r.add(str(d["candidate_id"]), "settled", f"settled as the winner early: {d.get('reason')}")


_HANDLERS: dict[str, Callable[[_Reader, Mapping[str, Any]], None]] = {
    "iteration": _iteration,
    "candidate": _created,
    "gate": _gate,
    "stack": _stack,
    "blame": _blame,
    "rebase": _rebase,
    "regate": _regate,
    "skipped": _skipped,
    "train_verdict": _verdict,
    "settled": _settled,
}


def gepa_decisions(events: Sequence[Event]) -> dict[str, list[Decision]]:
    """Each candidate's decisions from a GEPA run's events, in the order they were logged."""
    reader = _Reader()
    for event in sorted(events, key=lambda e: e.seq):
        reader.read(event)
    return dict(reader.out)
