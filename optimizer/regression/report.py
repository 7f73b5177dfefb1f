"""The check's reports (pure): a Markdown comment for a pull request, a JSON document, and the
few lines the command prints."""

from __future__ import annotations

import difflib
from typing import Any

from optimizer.regression.spec import CheckResult

__all__ = ["CHECK_FORMAT", "check_json", "check_markdown", "check_summary"]

CHECK_FORMAT = "gepa-runtime/check/1"
MAX_SEED_ROWS = 50
MAX_DIFF_LINES = 200


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _verdict_word(result: CheckResult) -> str:
    return "PASSED" if result.passed else "FAILED"


def _lift(result: CheckResult) -> str:
    v = result.verdict
    return f"lift {v.lift:+.3f}, 95% CI [{v.ci_low:+.3f}, {v.ci_high:+.3f}]"


def _why(result: CheckResult) -> str:
    v = result.verdict
    bar = f"{0.0 - v.margin:+.3f}"  # 0.0 - x: a margin of 0 reads +0.000, not -0.000
    if result.passed:
        return (
            f"not worse than the reference by more than {v.margin:g} (the interval's upper "
            f"end {v.ci_high:+.3f} is at or above {bar})"
        )
    return f"worse than the reference by more than {v.margin:g} (the whole interval is below {bar})"


def check_summary(result: CheckResult) -> str:
    """What ``gepa-runtime check`` prints: the verdict, the lift, what it cost."""
    v = result.verdict
    lines = [
        f"{_verdict_word(result)}: candidate {result.candidate.candidate_id} vs reference "
        f"{result.reference.candidate_id} on {v.n} {result.split} seeds: {_why(result)}",
        f"  {result.split}: reference {_score(v.reference_mean)} -> candidate "
        f"{_score(v.candidate_mean)}  ({_lift(result)}; {v.wins} seeds better, {v.losses} worse)",
        f"  rollouts: {result.paid} paid, {result.cached} cached, {_errored(result)} errored",
    ]
    if result.recorded is not None:
        rec = result.recorded
        lines.append(
            f"  run {result.run_id} recorded: lift {float(rec['lift']):+.3f}, 95% CI "
            f"[{float(rec['ci_low']):+.3f}, {float(rec['ci_high']):+.3f}] on {rec['n']} seeds "
            f"(drift {result.drift:+.3f})"
        )
    lines += [f"  warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def _errored(result: CheckResult) -> int:
    return sum(len(seeds) for seeds in result.errors.values())


def check_markdown(result: CheckResult) -> str:
    """The report as a pull-request comment."""
    v = result.verdict
    out = [
        f"### gepa-runtime check: {_verdict_word(result)}",
        "",
        f"The candidate is {_why(result)}.",
        "",
        "| | |",
        "|---|---|",
        f"| candidate | {result.candidate.what} (`{result.candidate.candidate_id}`) |",
        f"| reference | {result.reference.what} (`{result.reference.candidate_id}`) |",
        f"| program | `{result.program_id}` (fingerprint `{result.fingerprint[:12]}`) |",
        f"| seeds | {v.n} paired: {result.seeds_from} |",
        f"| {result.split} | reference {_score(v.reference_mean)} -> candidate {_score(v.candidate_mean)} |",
        f"| lift | **{v.lift:+.3f}** (95% CI [{v.ci_low:+.3f}, {v.ci_high:+.3f}]), {v.wins} seeds better, {v.losses} worse |",
        f"| rollouts | {result.paid} paid, {result.cached} cached, {_errored(result)} errored |",
    ]
    if result.recorded is not None:
        rec = result.recorded
        out.append(
            f"| run `{result.run_id}` | recorded lift {float(rec['lift']):+.3f} (95% CI "
            f"[{float(rec['ci_low']):+.3f}, {float(rec['ci_high']):+.3f}]); drift {result.drift:+.3f} |"
        )
    out += [f"\n> warning: {w}" for w in result.warnings]
    out += _seed_rows(result)
    out += _diff(result)
    return "\n".join(out) + "\n"


def _seed_rows(result: CheckResult) -> list[str]:
    cand, ref = result.scores["candidate"], result.scores["reference"]
    differ = [s for s in result.seeds if s in cand and s in ref and cand[s] != ref[s]]
    if not differ:
        return []
    rows = [
        "",
        f"<details><summary>{len(differ)} seeds where they differ</summary>",
        "",
        "| seed | reference | candidate |",
        "|---|---|---|",
    ]
    rows += [f"| `{s}` | {_score(ref[s])} | {_score(cand[s])} |" for s in differ[:MAX_SEED_ROWS]]
    if len(differ) > MAX_SEED_ROWS:
        rows.append(f"| ... {len(differ) - MAX_SEED_ROWS} more in the JSON report | | |")
    return [*rows, "", "</details>"]


def _diff(result: CheckResult) -> list[str]:
    before, after = result.reference.components, result.candidate.components
    lines: list[str] = []
    for name in after:
        lines += difflib.unified_diff(
            before.get(name, "").splitlines(),
            after[name].splitlines(),
            fromfile=f"reference/{name}",
            tofile=f"candidate/{name}",
            lineterm="",
        )
    if not lines:
        return ["", "The candidate's texts are the reference's."]
    shown = lines[:MAX_DIFF_LINES]
    if len(lines) > MAX_DIFF_LINES:
        shown.append(f"... {len(lines) - MAX_DIFF_LINES} more lines")
    return [
        "",
        "<details><summary>prompt diff</summary>",
        "",
        "```diff",
        *shown,
        "```",
        "",
        "</details>",
    ]


def check_json(result: CheckResult) -> dict[str, Any]:
    """The machine-readable report."""
    cand, ref = result.scores["candidate"], result.scores["reference"]
    return {
        "format": CHECK_FORMAT,
        "check_id": result.check_id,
        "passed": result.passed,
        "exit_code": 0 if result.passed else 1,
        "verdict": result.verdict.as_dict(),
        "candidate": _side(result, "candidate"),
        "reference": _side(result, "reference"),
        "program": {"program_id": result.program_id, "fingerprint": result.fingerprint},
        "split": result.split,
        "seeds_from": result.seeds_from,
        "bootstrap_seed": result.seed,
        "task_model": result.task_model,
        "per_seed": {s: {"reference": ref.get(s), "candidate": cand.get(s)} for s in result.seeds},
        "rollouts": {"paid": result.paid, "cached": result.cached, "errors": _errored(result)},
        "errors": {side: dict(seeds) for side, seeds in result.errors.items()},
        "run": None
        if result.run_id is None
        else {"run_id": result.run_id, "recorded": result.recorded, "drift": result.drift},
        "warnings": list(result.warnings),
    }


def _side(result: CheckResult, name: str) -> dict[str, Any]:
    side = result.candidate if name == "candidate" else result.reference
    return {
        "named": side.named,
        "what": side.what,
        "candidate_id": side.candidate_id,
        "components": side.components,
    }
