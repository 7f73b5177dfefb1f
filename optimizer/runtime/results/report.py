"""``report.md``: the evidence packet rendered for people (a pure function of the packet and
of the method that wrote its own part)."""

from __future__ import annotations

import json
from typing import Any

from optimizer.runtime.results.forecast_check import forecast_lines
from optimizer.runtime.results.objectives import format_value, objectives_lines
from optimizer.runtime.results.why import why_table
from optimizer.runtime.search.strategy import SearchMethod

__all__ = ["promotion_summary", "render_report"]


NO_HOLDOUT = (
    "no holdout seeds: the lift is measured on the seeds the winner was chosen on ({split}), "
    "so it includes the luck of that choice"
)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def promotion_summary(packet: dict[str, Any]) -> str:
    """The verdict in a few lines (also printed by the CLI at the end of a run)."""
    promo, base, best = packet["promotion"], packet["baseline"], packet["best"]
    verdict = "PROMOTED" if promo["promoted"] else "NOT PROMOTED"
    split, measured = promo["selection_split"], promo.get("measured_on", "holdout")
    chosen = f"best chosen on {promo.get('selection_seeds', '?')} {split} seeds"
    where = "lift measured on other seeds" if measured == "holdout" else "lift measured there too"
    lines = [
        f"{verdict}: best {best['candidate_id']} vs baseline {base['candidate_id']} on {promo['n']} {measured} seeds",
        f"  {measured + ':':<8} baseline {_pct(base[measured])} -> best {_pct(best[measured])}  "
        f"(lift {promo['lift']:+.3f}, 95% CI [{promo['ci_low']:+.3f}, {promo['ci_high']:+.3f}], "
        f"min improvement {promo['min_improvement']:+.3f})",
        f"  train:   baseline {_pct(base['train'])} -> best {_pct(best['train'])}  ({chosen}, {where})",
        f"  rollouts: {packet['rollouts']['paid']} paid, {packet['rollouts']['cached']} cached, "
        f"{packet['rollouts']['errors']} errors, {packet['rollouts']['retries']} retries; "
        f"cost ${packet['usage']['total_cost_usd']:.4f}",
    ]
    skipped = packet.get("plan", {}).get("skipped", [])
    if skipped:
        lines.append("  budget: " + "; ".join(skipped))
    aside = [note["seed"] for note in packet.get("set_aside", [])]
    if aside:
        lines.append(
            f"  set aside: {len(aside)} seeds failed for 2 different candidates each and were "
            f"not asked again nor scored ({', '.join(aside)})"
        )
    if measured != "holdout":
        lines.append(f"  note: {NO_HOLDOUT.format(split=measured)}")
    lines += _rule_lines(promo)
    if not promo["significant"] and promo["promoted"]:
        lines.append(
            "  note: the interval includes 0; more holdout seeds would make the lift certain"
        )
    return "\n".join(lines)


def _rule_lines(promo: dict[str, Any]) -> list[str]:
    """Under a --select rule other than best: what it weighed, and what it cost in reward."""
    rule, objective = promo.get("select", "best"), promo.get("objective")
    if rule == "best":
        return []
    line = f"  select:   {rule}"
    if objective:
        name = objective["name"]
        low, high = (format_value(name, objective[k], signed=True) for k in ("ci_low", "ci_high"))
        line += (
            f"; {name} {format_value(name, objective['diff'], signed=True)} against the "
            f"baseline (95% CI [{low}, {high}])"
        )
    out = [line]
    tradeoff = promo.get("tradeoff") or {}
    if tradeoff.get("reward_given_up", 0) > 0:
        out.append(
            f"  note: the winner gives up {tradeoff['reward_given_up']:.3f} of reward on the "
            f"selection seeds against {tradeoff['top_id']}, the best-scoring candidate"
        )
    if objective and objective["improved"] and promo["lift"] < 0:
        out.append(
            f"  note: a winner cheaper on {objective['name']} that costs reward: lift "
            f"{promo['lift']:+.3f} against the baseline"
        )
    return out


def _plan_lines(packet: dict[str, Any]) -> list[str]:
    """Which seeds chose the winner, which measured it, and what the budget skipped."""
    plan, promo = packet.get("plan") or {}, packet["promotion"]
    split, measured = promo["selection_split"], promo.get("measured_on", "holdout")
    out = [
        "## Seeds",
        "",
        f"- chose the winner: {promo.get('selection_seeds', '?')} {split} seeds"
        + (" (its train scores, already paid for)" if split == "train" else ""),
    ]
    if measured == "holdout":
        out.append(
            f"- measured the lift: {promo.get('holdout_seeds', promo['n'])} holdout seeds "
            f"({promo['n']} scored by both best and baseline); never used to choose"
        )
    else:
        out.append(
            f"- measured the lift: the same {promo.get('measured_seeds', promo['n'])} {measured} "
            f"seeds ({promo['n']} scored by both): {NO_HOLDOUT.format(split=measured)}"
        )
    if plan.get("skipped"):
        out += ["", "### What this budget skipped", ""]
        out += [f"- {item}" for item in plan["skipped"]]
    return [*out, ""]


def _set_aside_lines(notes: list[dict[str, Any]]) -> list[str]:
    """Seeds that failed for two candidates: not asked again, in no score (never a 0)."""
    if not notes:
        return []
    out = [
        "## Seeds set aside",
        "",
        "Each failed after its retries for two different candidates, so it was not asked again "
        "and is in no score: every mean, the frontier and the lift are over the other seeds.",
        "",
        "| seed | failed for | last error |",
        "|---|---|---|",
    ]
    for note in notes:
        error = note["error"].replace("\n", " ").replace("|", "/")[:200]
        out.append(f"| {note['seed']} | {', '.join(note['candidates'])} | {error} |")
    return [*out, ""]


def _warning_lines(warnings: list[str]) -> list[str]:
    """What went wrong around the run without stopping it (a changed program, tracking)."""
    if not warnings:
        return []
    return ["## Warnings", "", *(f"- {w}" for w in warnings), ""]


def render_report(packet: dict[str, Any], method: SearchMethod) -> str:
    """Markdown report: verdict, scores, diff, lineage, per-seed wins, the part of ``method``
    (the one the packet names), usage, traces."""
    name = packet.get("method", "gepa")
    out = [
        *_head_lines(packet),
        *_candidate_lines(packet),
        "",
        *why_table(packet.get("decisions") or []),
        *_frontier_lines(packet),
        *objectives_lines(packet),
        *(method.report_lines(packet[name]) if name in packet else []),
        *_usage_lines(packet["usage"]),
        *forecast_lines(packet.get("forecast")),
        *_trace_lines(packet["traces"]),
    ]
    return "\n".join(out)


def _head_lines(packet: dict[str, Any]) -> list[str]:
    """Title, verdict, plan, warnings, scores, the prompt diff and the best prompt."""
    best, base = packet["best"], packet["baseline"]
    out = [
        f"# {packet.get('method', 'gepa').upper()} run {packet['run_id']}: "
        f"{packet['program']['program_id']}",
        "",
        f"Status: **{packet['status']}**. Stop reason: {packet.get('stop_reason') or 'n/a'}.",
        "",
        "## Verdict",
        "",
        "```",
        promotion_summary(packet),
        "```",
        "",
        *_plan_lines(packet),
        *_set_aside_lines(packet.get("set_aside") or []),
        *_warning_lines(packet.get("warnings") or []),
        "## Scores",
        "",
        "| candidate | train | val | holdout |",
        "|---|---|---|---|",
        f"| baseline `{base['candidate_id']}` | {_pct(base['train'])} | {_pct(base['val'])} | {_pct(base['holdout'])} |",
        f"| best `{best['candidate_id']}` | {_pct(best['train'])} | {_pct(best['val'])} | {_pct(best['holdout'])} |",
        "",
        "## Prompt diff (baseline -> best)",
        "",
        "```diff",
        packet["diff"] or "(no change: the baseline is still the best candidate)",
        "```",
        "",
        "## Best prompt",
        "",
    ]
    for name, text in best["components"].items():
        out += [f"### {name}", "", "```", text, "```", ""]
    return out


def _candidate_lines(packet: dict[str, Any]) -> list[str]:
    """The best's lineage, then every candidate with its scores and rationale."""
    out = ["## Lineage", "", " -> ".join(f"`{c}`" for c in packet["best"]["lineage"]), ""]
    out += [
        "## Candidates",
        "",
        "| id | origin | parents | train | holdout | rationale |",
        "|---|---|---|---|---|---|",
    ]
    for c in packet["candidates"]:
        why = (c["rationale"] or "").replace("\n", " ").replace("|", "/")[:160]
        out.append(
            f"| `{c['candidate_id']}` | {c['origin']} | {', '.join(c['parents']) or '-'} | "
            f"{_pct(c['train'])} | {_pct(c['holdout'])} | {why} |"
        )
    return out


def _frontier_lines(packet: dict[str, Any]) -> list[str]:
    """Which candidates win each train seed; a seed nobody solved is a miss, not a win."""
    frontier = packet["frontier"]
    seeds = frontier.get("seeds", len(frontier["train_seeds"]))
    out = ["", "## Per-seed wins on train (Pareto frontier)", ""]
    if "covered" in frontier:
        out += [
            f"{frontier['covered']}/{seeds} train seeds covered (solved by some candidate).",
            "",
        ]
    out += ["| seed | winners |", "|---|---|"]
    best = frontier.get("best_scores", {})
    for seed, winners in frontier["train_seeds"].items():
        miss = "- (no score)" if seed not in best else "- (nobody solved it)"
        out.append(f"| {seed} | {', '.join(f'`{w}`' for w in winners) or miss} |")
    return out


def _usage_lines(usage: dict[str, Any]) -> list[str]:
    """Student and proposer usage, apart."""
    return [
        "",
        "## Usage",
        "",
        f"- student: {usage['student']['rollouts']} paid rollouts, {usage['student']['input_tokens']} in / "
        f"{usage['student']['output_tokens']} out tokens, ${usage['student']['cost_usd']:.4f}"
        + _student_unknown(usage["student"]),
        f"- proposer: {usage['proposer']['calls']} calls, {usage['proposer']['input_tokens']} in / "
        f"{usage['proposer']['output_tokens']} out tokens, ${usage['proposer']['cost_usd']:.4f}"
        + _unknown(usage["proposer"]),
    ]


def _trace_lines(traces: list[dict[str, Any]]) -> list[str]:
    """A few representative traces of the best, with the baseline's reward beside."""
    out = ["", "## Representative traces", ""]
    for trace in traces:
        out += [
            f"### {trace['seed']} ({trace['why']}; best {trace['reward']}, baseline {trace['baseline_reward']})",
            "",
            f"Feedback: {trace['feedback']}",
            "",
            "```json",
            json.dumps(trace["trace"], indent=2)[:3000],
            "```",
            "",
        ]
    return out


def _student_unknown(student: dict[str, Any]) -> str:
    """Paid rollouts no price table could price: the dollars before are a lower bound."""
    count = student.get("cost_unknown", 0)
    if not count:
        return ""
    return (
        f" (at least: the cost of {count} rollouts is unknown, no price for the student model; "
        "give it with --prices)"
    )


def _unknown(proposer: dict[str, Any]) -> str:
    """What a proposer command did not report: the figures before it are a lower bound."""
    parts = [
        f"{what} not reported by {proposer.get(key, 0)} calls"
        for key, what in (("usage_unknown", "tokens"), ("cost_unknown", "cost"))
        if proposer.get(key, 0)
    ]
    return f" (at least: {'; '.join(parts)}, unknown)" if parts else ""
