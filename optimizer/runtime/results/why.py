"""Why each candidate of a run was kept or dropped: its decisions, read from the run's events.

    events = await read_events(workspace, run_id)
    why = explain(events, candidates, method)   # one entry per candidate, in creation order

The method reads its own events (``SearchMethod.decisions``: how a candidate was made, gated,
stacked...); this module adds what the runtime knows of every method's candidates: their
train scores (``scored``), the seeds they win (the last ``frontier``), the winner and the
candidates considered with it (``promotion``), and a person's actions (``action`` events:
reject, pin, unpin, a note on a candidate). A candidate's *decision* is the outcome of its last
decision that decided something (a person's rejection, whatever was judged after it), and
*because* that decision's sentence with its numbers.
Built from the log alone, a finished run answers as a live one does; the evidence packet
carries it (``decisions``) and ``report.md`` its table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optimizer.runtime.search.strategy import SearchMethod
from schemas import CandidateRecord, Event
from workspace import Workspace

__all__ = ["explain", "read_events", "why_lines", "why_table"]

PAGE = 1000
SKIP = frozenset({"trials"})  # the rollouts feed: large, and no decision is in it
Decision = dict[str, Any]


async def read_events(workspace: Workspace, run_id: str) -> list[Event]:
    """Every event of the run but the rollouts feed (``trials``), in order."""
    out: list[Event] = []
    after = 0
    while True:
        page = await workspace.events_since(run_id, after, PAGE)
        out += [e for e in page if e.type not in SKIP]
        if len(page) < PAGE:
            return out
        after = page[-1].seq


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3g}"


class _Runtime:
    """The runtime's own decisions, folded from the events in order."""

    def __init__(self, seeds: set[str]) -> None:
        self.seeds = seeds  # the baseline's id(s): its scores make it no decision
        self.out: dict[str, list[Decision]] = {}
        self.created: dict[str, Event] = {}
        self.won: dict[str, int] = {}
        self.train: dict[str, float | None] = {}
        self.partial: dict[str, dict[str, Any]] = {}
        self.holdout: dict[str, float | None] = {}
        self.pinned: str | None = None

    def add(self, event: Event, cid: str, kind: str, text: str, outcome: str | None) -> None:
        entry: Decision = {"kind": kind, "seq": event.seq, "ts": event.ts, "text": text}
        if outcome is not None:
            entry["outcome"] = outcome
        self.out.setdefault(cid, []).append(entry)

    def read(self, event: Event) -> None:
        reader = _READERS.get(event.type)
        if reader is not None:
            reader(self, event, event.data)


def _scored(r: _Runtime, e: Event, d: Mapping[str, Any]) -> None:
    cid, split = str(d.get("candidate_id")), d.get("split")
    if split == "train":
        r.train[cid] = d.get("mean")
        outcome = "baseline" if cid in r.seeds else "scored on train"
        text = f"scored on every train seed: mean {_fmt(d.get('mean'))}"
        r.add(e, cid, "scored", text + f", best seed {_fmt(d.get('best_seed'))}", outcome)
    elif split == "train_partial":
        r.partial[cid] = {"seeds": d.get("seeds"), "of": d.get("of")}
        text = f"scored on {d.get('seeds')} of {d.get('of')} train seeds: the budget's last"
        r.add(e, cid, "scored", text, "partly scored on train")


def _frontier(r: _Runtime, e: Event, d: Mapping[str, Any]) -> None:
    won: dict[str, int] = {}
    for winners in (d.get("winners") or {}).values():
        for cid in winners:
            won[cid] = won.get(cid, 0) + 1
    r.won = won


def _promotion(r: _Runtime, e: Event, d: Mapping[str, Any]) -> None:
    best, base = str(d.get("best_id")), str(d.get("baseline_id"))
    where = d.get("measured_on", "holdout")
    r.holdout.update({best: d.get("best_holdout"), base: d.get("baseline_holdout")})
    verdict = "promoted" if d.get("promoted") else "not promoted"
    text = (
        f"chosen as the winner on {d.get('selection_split')}; on {d.get('n')} {where} seeds "
        f"{_fmt(d.get('best_holdout'))} against the baseline's {_fmt(d.get('baseline_holdout'))}: "
        f"lift {float(d.get('lift') or 0.0):+.3f} (95% CI {_fmt(d.get('ci_low'))} to "
        f"{_fmt(d.get('ci_high'))}, minimum {_fmt(d.get('min_improvement'))}), {verdict}"
    )
    r.add(e, best, "winner", text, f"winner, {verdict}")
    for cid in d.get("considered") or []:
        if cid not in (best, base):
            text = f"considered for the winner on {d.get('selection_split')}, not chosen"
            r.add(e, str(cid), "selection", text, "not chosen at selection")


def _action(r: _Runtime, e: Event, d: Mapping[str, Any]) -> None:
    action, source = d.get("action"), d.get("source") or "a person"
    cid = d.get("candidate_id")
    if action == "reject" and cid:
        text = f"rejected by a person ({source}): {d.get('reason') or 'no reason given'}"
        r.add(e, str(cid), "person", text, "rejected by a person")
        r.out[str(cid)][-1]["final"] = True  # what is judged of it after stands beside it
    elif action == "pin" and cid:
        r.pinned = str(cid)
        r.add(
            e, r.pinned, "person", f"pinned by a person ({source}): proposals start from it", None
        )
    elif action == "unpin" and (cid or r.pinned):
        r.add(e, str(cid or r.pinned), "person", f"unpinned by a person ({source})", None)
        r.pinned = None
    elif action == "note" and cid:
        text = f"a person's note ({source}) for the proposals on its lineage: {d.get('text')}"
        r.add(e, str(cid), "person", text, None)


def _candidate(r: _Runtime, e: Event, d: Mapping[str, Any]) -> None:
    r.created.setdefault(str(d.get("candidate_id")), e)


_READERS: dict[str, Callable[[_Runtime, Event, Mapping[str, Any]], None]] = {
    "scored": _scored,
    "frontier": _frontier,
    "promotion": _promotion,
    "action": _action,
    "candidate": _candidate,
}


def _created(
    record: CandidateRecord, event: Event | None, branch_of: Mapping[str, Any] | None
) -> Decision:
    """How the runtime tells a candidate was made when its method says nothing of it."""
    if record.origin == "seed":
        text = (
            f"the baseline of this branch: candidate {branch_of.get('candidate_id')} of run "
            f"{branch_of.get('run_id')}"
            if branch_of
            else "the baseline: the program's own texts"
        )
    else:
        made = f"made by {record.origin} from {', '.join(record.parents) or 'nothing'}"
        text = made + (f": {record.rationale[:200]}" if record.rationale else "")
    entry: Decision = {"kind": "created", "seq": event.seq if event else 0, "text": text}
    entry["ts"] = event.ts if event else None
    entry["outcome"] = "baseline" if record.origin == "seed" else "not evaluated"
    return entry


def explain(
    events: Sequence[Event],
    candidates: Sequence[CandidateRecord],
    method: SearchMethod,
    *,
    branch_of: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each candidate (in creation order) with how it was made, its scores, its decisions in
    the order they were logged, and its decision: the last outcome, with what it rests on."""
    runtime = _Runtime({c.candidate_id for c in candidates if c.origin == "seed"})
    for event in sorted(events, key=lambda e: e.seq):
        runtime.read(event)
    own = method.decisions(events)
    out = []
    for record in candidates:
        cid = record.candidate_id
        decisions = sorted(
            [*own.get(cid, []), *runtime.out.get(cid, [])], key=lambda x: x.get("seq") or 0
        )
        if not any(d["kind"] == "created" for d in decisions):
            decisions.insert(0, _created(record, runtime.created.get(cid), branch_of))
        deciding = [d for d in decisions if d.get("outcome")]
        final = [d for d in deciding if d.get("final")]  # a person's rejection
        last = (final or deciding or decisions)[-1]
        out.append(
            {
                "candidate_id": cid,
                "origin": record.origin,
                "parents": list(record.parents),
                "rationale": record.rationale[:1000],
                "created": next(d for d in decisions if d["kind"] == "created"),
                "decision": last.get("outcome", "not evaluated"),
                "because": last["text"],
                "scores": {
                    "train": runtime.train.get(cid),
                    "train_partial": runtime.partial.get(cid),
                    "seeds_won": runtime.won.get(cid, 0),
                    "holdout": runtime.holdout.get(cid),
                },
                "decisions": decisions,
            }
        )
    return out


def why_lines(why: Sequence[Mapping[str, Any]]) -> list[str]:
    """The decisions as text, a block per candidate (what ``runs why`` prints)."""
    out: list[str] = []
    for c in why:
        s = c["scores"]
        out += [
            f"{c['candidate_id']}  {c['origin']}  -> {c['decision']}",
            f"  train {_fmt(s['train'])}, wins {s['seeds_won']} train seeds at the end"
            + (f", holdout {_fmt(s['holdout'])}" if s["holdout"] is not None else "")
            + (f"; parents {', '.join(c['parents'])}" if c["parents"] else ""),
        ]
        out += [f"  - {d['text']}" for d in c["decisions"]]
        out.append("")
    return out


def why_table(why: Sequence[Mapping[str, Any]]) -> list[str]:
    """``report.md``'s ``## Decisions`` section: each candidate's decision and its numbers."""
    out = [
        "## Decisions",
        "",
        "Each candidate's decision and what it rests on (`gepa-runtime runs why RUN_ID` "
        "tells every step).",
        "",
        "| candidate | decision | because | train | holdout |",
        "|---|---|---|---|---|",
    ]
    for c in why:
        because = str(c["because"]).replace("\n", " ").replace("|", "/")[:200]
        s = c["scores"]
        out.append(
            f"| `{c['candidate_id']}` | {c['decision']} | {because} | {_fmt(s['train'])} "
            f"| {_fmt(s['holdout'])} |"
        )
    return [*out, ""]
