"""Why each MIPRO candidate was kept or dropped, as its ``trial`` events tell it.

A MIPRO candidate is one (instruction, demo set) pair: each trial scores one on a minibatch,
and the best so far is the one with the best mean over every minibatch it was scored on.
The runtime adds what it knows (train scores, the winner): :mod:`optimizer.runtime.results.why`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from schemas import Event

__all__ = ["mipro_decisions"]


def mipro_decisions(events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
    """Each candidate's trials, in order: the pair it is, its minibatch score, whether it was
    the best so far after that trial."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in sorted(events, key=lambda e: e.seq):
        if event.type != "trial":
            continue
        d = event.data
        cid, score = str(d["candidate_id"]), d.get("score")
        best = (d.get("best") or {}).get("candidate_id") == cid
        text = (
            f"trial {d.get('trial')}: instruction {d.get('instruction')} with demo set "
            f"{d.get('demo_set')}, minibatch mean {'-' if score is None else f'{score:.3g}'} on "
            f"{len(d.get('minibatch') or [])} seeds" + ("; the best so far" if best else "")
        )
        out[cid].append(
            {
                "kind": "trial",
                "seq": event.seq,
                "ts": event.ts,
                "text": text,
                "outcome": "best so far" if best else "scored on a minibatch",
                "trial": d.get("trial"),
                "score": score,
                "minibatch": list(d.get("minibatch") or []),
            }
        )
    return dict(out)
