"""The evidence packet's ``objectives``: every candidate's reward against what it costs.

For each candidate scored on all of train: its train mean reward, its holdout mean where it
was measured, and the means of its other objectives over its train and holdout seeds
(``cost_usd`` and ``latency_ms`` per rollout, ``prompt_tokens``, the container's own). The
frontier over objectives marks, for reward against each measured objective, the candidates no
other one beats on both (:func:`optimizer.runtime.search.selection.non_dominated`), and
``all`` over reward and the three together. The chart of it is ``frontier.svg``
(:mod:`optimizer.runtime.results.frontier_chart`), referenced from ``report.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from optimizer.runtime.accounts.objectives import MEASURED
from optimizer.runtime.results.promotion import Promotion
from optimizer.runtime.search.frontier import mean_score
from optimizer.runtime.search.selection import Point, non_dominated
from optimizer.runtime.search.state import SearchState
from schemas import Direction

__all__ = ["CHART_FILE", "dollars", "format_value", "objectives_lines", "objectives_section"]

CHART_FILE = "frontier.svg"


def _points(state: SearchState, seeds: set[str]) -> list[Point]:
    out = []
    for cid in state.order():
        reward = state.train_mean(cid)
        if reward is not None:
            out.append(Point(cid, reward, state.objectives.means(cid, seeds)))
    return out


def objectives_section(
    state: SearchState,
    holdout: list[str],
    directions: Mapping[str, Direction],
    promotion: Promotion,
    baseline_id: str,
) -> dict[str, Any]:
    """The packet's ``objectives`` (keys in ``docs/reference/evidence.md``)."""
    seeds = {*state.train_seeds, *holdout}
    points = _points(state, seeds)
    fronts = {
        name: non_dominated(points, {"reward": "maximize", name: info.direction})
        for name, info in MEASURED.items()
    }
    fronts["all"] = non_dominated(
        points, {"reward": "maximize", **{n: i.direction for n, i in MEASURED.items()}}
    )
    candidates = []
    for p in points:
        candidates.append(
            {
                "candidate_id": p.candidate_id,
                "reward": p.reward,
                "holdout": mean_score(state.holdout[p.candidate_id], holdout)
                if p.candidate_id in state.holdout
                else None,
                **{name: value for name, value in p.objectives.items() if name != "reward"},
                "cost_unknown": state.objectives.unknown_cost(p.candidate_id),
                "baseline": p.candidate_id == baseline_id,
                "winner": p.candidate_id == promotion.best_id,
                "on_frontier": {name: p.candidate_id in ids for name, ids in fronts.items()},
            }
        )
    return {
        "select": promotion.select,
        "directions": dict(directions),
        "reward_on": "train",
        "objectives_on": "train and holdout",
        "candidates": candidates,
        "frontier": fronts,
        "chart": CHART_FILE,
    }


def dollars(value: float, *, signed: bool = False) -> str:
    """Dollars with three significant digits, never in exponent form (``$0.0000108``)."""
    sign = ("+" if value >= 0 else "-") if signed else ("-" if value < 0 else "")
    size = abs(value)
    places = 2 if size >= 1 or size == 0 else max(2, 2 - math.floor(math.log10(size)))
    return f"{sign}${size:.{places}f}"


def format_value(name: str, value: float | None, *, signed: bool = False) -> str:
    """An objective's value as a person reads it: dollars, milliseconds, tokens."""
    if value is None:
        return "unknown"
    if name == "cost_usd":
        return dollars(value, signed=signed)
    sign = "+" if signed and value >= 0 else ""
    if name == "latency_ms":
        return f"{sign}{value:.1f} ms" if abs(value) < 10 else f"{sign}{value:.0f} ms"
    if name == "prompt_tokens":
        return f"{sign}{value:.0f} tokens"
    return f"{sign}{value:.4g}"


_value = format_value


def objectives_lines(packet: dict[str, Any]) -> list[str]:
    """``report.md``'s lines for the objectives, the rule's choice and the chart."""
    section = packet.get("objectives")
    if not section:
        return []
    promo = packet["promotion"]
    out = ["", "## What the candidates cost", ""]
    out += _choice_lines(promo)
    out += [
        f"![reward against cost per rollout, the frontier marked]({section['chart']})",
        "",
        "Reward is the train mean; cost, latency and length are means over the train and "
        "holdout seeds. A candidate marked * is on the frontier: no other one has a higher "
        "reward and a lower cost.",
        "",
        "| candidate | reward | holdout | cost / rollout | latency | prompt tokens |",
        "|---|---|---|---|---|---|",
    ]
    for c in section["candidates"]:
        tag = " (baseline)" if c["baseline"] else " (winner)" if c["winner"] else ""
        star = "*" if c["on_frontier"].get("cost_usd") else ""
        holdout = "n/a" if c["holdout"] is None else f"{c['holdout']:.3f}"
        out.append(
            f"| `{c['candidate_id']}`{star}{tag} | {c['reward']:.3f} | {holdout} | "
            f"{_value('cost_usd', c.get('cost_usd'))} | {_value('latency_ms', c.get('latency_ms'))} | "
            f"{_value('prompt_tokens', c.get('prompt_tokens'))} |"
        )
    return out


def _choice_lines(promo: Mapping[str, Any]) -> list[str]:
    """The rule, what it weighed, and plainly what a cheaper winner cost in reward."""
    rule = promo.get("select", "best")
    out = [f"Winner chosen by `--select {rule}`."]
    tradeoff, objective = promo.get("tradeoff"), promo.get("objective")
    if tradeoff:
        out += _tradeoff_lines(tradeoff)
    if objective:
        name = objective["name"]
        out.append(
            f"On the {promo.get('measured_on', 'holdout')} seeds, {name}: baseline "
            f"{_value(name, objective['baseline'])} -> winner {_value(name, objective['best'])} "
            f"(difference {_value(name, objective['diff'], signed=True)}, 95% CI "
            f"[{_value(name, objective['ci_low'], signed=True)}, "
            f"{_value(name, objective['ci_high'], signed=True)}], {objective['n']} paired "
            "seeds); reward lift "
            f"{promo['lift']:+.3f}, 95% CI [{promo['ci_low']:+.3f}, {promo['ci_high']:+.3f}]."
        )
        if objective["improved"] and promo["lift"] < 0:
            out.append(
                f"The winner is cheaper on {name} and costs reward: {promo['lift']:+.3f} "
                "against the baseline."
            )
    return [*out, ""]


def _tradeoff_lines(tradeoff: Mapping[str, Any]) -> list[str]:
    if not tradeoff["eligible"]:
        return [
            f"No candidate met `{tradeoff['rule']}`: the baseline stays, and nothing is promoted."
        ]
    given = tradeoff["reward_given_up"]
    name = tradeoff["ranked_by"]
    if given <= 0:
        return [f"The winner has the best reward too (ranked by {name})."]
    return [
        f"The winner gives up {given:.3f} of reward on the selection seeds against the best "
        f"candidate `{tradeoff['top_id']}` ({tradeoff['chosen_reward']:.3f} against "
        f"{tradeoff['top_reward']:.3f}), for {name} {_value(name, tradeoff['chosen_value'])} "
        f"against {_value(name, tradeoff['top_value'])}."
    ]
