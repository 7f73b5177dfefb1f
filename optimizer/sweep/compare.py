"""The comparison of a sweep: one row per student model, the winner, and what looks wrong.

Pure functions of what the runs left behind (their evidence packets and the baseline's
rollouts), so the CLI, the Python API and the service build the same comparison:

- per model: the baseline's and the best candidate's holdout means, each with a 95%
  percentile-bootstrap interval over the holdout seeds; the paired lift and whether it was
  promoted; the student cost per paid rollout; the mean rollout latency;
- the cheapest model whose best holdout mean meets ``target_score`` (when one is given;
  the cost per rollout decides, then the higher score);
- models the container does not tell apart: the same program fingerprint and identical
  outputs wherever their runs made the same rollout, which means the container ignores
  ``policy.model``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Comparison", "ModelRow", "compare", "mean_interval", "render_markdown", "render_table"]


@dataclass(frozen=True)
class ModelRow:
    """One student model's result in a sweep."""

    model: str
    run_id: str
    status: str
    baseline_holdout: float | None = None
    baseline_ci: tuple[float, float] | None = None
    best_holdout: float | None = None
    best_ci: tuple[float, float] | None = None
    lift: float | None = None
    promoted: bool = False
    cost_per_rollout_usd: float | None = None
    latency_ms: float | None = None
    paid_rollouts: int = 0
    fingerprint: str = ""


@dataclass(frozen=True)
class Comparison:
    """The rows, the cheapest model meeting the target, and the warnings."""

    rows: tuple[ModelRow, ...]
    target_score: float | None = None
    winner: str | None = None
    ignored_policy: tuple[tuple[str, ...], ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The comparison as ``comparison.json`` holds it."""
        return {
            "target_score": self.target_score,
            "winner": self.winner,
            "ignored_policy": [list(group) for group in self.ignored_policy],
            "warnings": list(self.warnings),
            "models": [asdict(row) for row in self.rows],
        }


def mean_interval(
    values: Sequence[float], rng: random.Random, *, resamples: int = 2000
) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the mean of ``values`` (None when empty)."""
    if not values:
        return None
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]


def model_row(
    model: str,
    run_id: str,
    status: str,
    packet: Mapping[str, Any] | None,
    latencies: Sequence[float],
    seed: int = 0,
) -> ModelRow:
    """A row from a run's evidence packet (None: the run left none) and rollout latencies."""
    if packet is None:
        return ModelRow(model, run_id, status)
    holdout = packet.get("per_seed", {}).get("holdout", {})
    base = [v["baseline"] for v in holdout.values() if v.get("baseline") is not None]
    best = [v["best"] for v in holdout.values() if v.get("best") is not None]
    paid = int(packet["rollouts"]["paid"])
    cost = float(packet["usage"]["student"]["cost_usd"])
    promo = packet["promotion"]
    return ModelRow(
        model=model,
        run_id=run_id,
        status=status,
        baseline_holdout=packet["baseline"]["holdout"],
        baseline_ci=mean_interval(base, random.Random(seed)),
        best_holdout=packet["best"]["holdout"],
        best_ci=mean_interval(best, random.Random(seed + 1)),
        lift=promo["lift"],
        promoted=bool(promo["promoted"]),
        cost_per_rollout_usd=cost / paid if paid else None,
        latency_ms=sum(latencies) / len(latencies) if latencies else None,
        paid_rollouts=paid,
        fingerprint=str(packet["program"]["fingerprint"]),
    )


def ignored_policy(
    rows: Sequence[ModelRow], outputs: Mapping[str, Mapping[Any, Any]]
) -> tuple[tuple[str, ...], ...]:
    """Groups of models the container answered alike: same fingerprint, same outputs.

    ``outputs[model]`` maps (candidate hash, seed) to the rollout's output and reward under
    that model. Two models count as alike when every rollout both runs made (the same
    candidate on the same seed) came out the same, and those rollouts are informative: they
    do not all share one output (a baseline that fails every seed says nothing).
    """
    groups: list[list[str]] = []
    for row in rows:
        mine = outputs.get(row.model) or {}
        for group in groups:
            other = next(r for r in rows if r.model == group[0])
            theirs = outputs.get(other.model) or {}
            shared = set(mine) & set(theirs)
            alike = all(mine[k] == theirs[k] for k in shared)
            if (
                other.fingerprint == row.fingerprint
                and alike
                and len({mine[k] for k in shared}) > 1
            ):
                group.append(row.model)
                break
        else:
            groups.append([row.model])
    return tuple(tuple(g) for g in groups if len(g) > 1)


def cheapest_meeting(rows: Sequence[ModelRow], target: float | None) -> str | None:
    """The model whose best holdout mean meets ``target`` at the lowest cost per rollout."""
    if target is None:
        return None
    able = [r for r in rows if r.best_holdout is not None and r.best_holdout >= target]
    if not able:
        return None
    return min(able, key=lambda r: (r.cost_per_rollout_usd or 0.0, -(r.best_holdout or 0.0))).model


def compare(
    rows: Sequence[ModelRow],
    outputs: Mapping[str, Mapping[Any, Any]],
    target_score: float | None = None,
) -> Comparison:
    """The comparison of ``rows`` (see the module docstring)."""
    same = ignored_policy(rows, outputs)
    warnings = [
        f"models {', '.join(group)} gave identical outputs on every rollout their runs share, "
        "under the same program fingerprint: the container seems to ignore policy.model (read it from "
        "candidate.model, or the rollout body's policy.model, to call that student)"
        for group in same
    ]
    warnings += [
        f"run {r.run_id} of {r.model} ended {r.status}" for r in rows if r.status != "completed"
    ]
    if target_score is not None and cheapest_meeting(rows, target_score) is None:
        warnings.append(f"no model reached the target score {target_score:g} on holdout")
    return Comparison(
        tuple(rows), target_score, cheapest_meeting(rows, target_score), same, tuple(warnings)
    )


def _num(value: float | None, ci: tuple[float, float] | None = None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _cells(row: ModelRow, winner: str | None) -> list[str]:
    cost = "n/a" if row.cost_per_rollout_usd is None else f"${row.cost_per_rollout_usd:.6f}"
    latency = "n/a" if row.latency_ms is None else f"{row.latency_ms:.0f} ms"
    lift = "n/a" if row.lift is None else f"{row.lift:+.3f}" + (" promoted" if row.promoted else "")
    name = row.model + (" *" if row.model == winner else "")
    return [name, _num(row.baseline_holdout, row.baseline_ci), _num(row.best_holdout, row.best_ci),
            lift, cost, latency, row.run_id]  # fmt: skip


HEADER = ["model", "baseline holdout [95% CI]", "best holdout [95% CI]", "lift",
          "cost / rollout", "latency", "run"]  # fmt: skip


def _footer(c: Comparison) -> list[str]:
    lines = []
    if c.target_score is not None:
        who = c.winner or "none"
        lines.append(f"cheapest model meeting {c.target_score:g} on holdout: {who}")
    lines += [f"warning: {w}" for w in c.warnings]
    return lines


def render_table(c: Comparison) -> str:
    """The comparison as an aligned text table (the CLI's output)."""
    rows = [HEADER, *(_cells(r, c.winner) for r in c.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([*(line.rstrip() for line in lines), *_footer(c)])


def render_markdown(c: Comparison) -> str:
    """``comparison.md``."""
    lines = ["# Student models compared", "", "| " + " | ".join(HEADER) + " |",
             "|" + "---|" * len(HEADER)]  # fmt: skip
    lines += ["| " + " | ".join(_cells(r, c.winner)) + " |" for r in c.rows]
    footer = _footer(c)
    return "\n".join([*lines, *([""] if footer else []), *(f"- {f}" for f in footer), ""])
