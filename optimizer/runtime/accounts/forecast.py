"""What a run will spend, before it spends it (pure): ``gepa-runtime optimize plan``'s figures.

From a few measurements (:class:`Samples`: the baseline's rollouts sent alone and together, a
few proposals written by the reflection model from them, their children scored on the same
seeds) and the run's config and plan, :func:`forecast` predicts each figure with the
assumption behind it. With ``T`` train, ``H`` holdout seeds, a minibatch of ``m``, ``K``
proposals in flight and ``c`` rollouts at once:

- **container calls**: the metric-call budget, all of it. A search ends sooner when a stop
  condition ends it (a candidate with full marks on every train seed, patience); the plan
  cannot know when, so the budget is an upper bound then. With ``--max-cost-usd`` below what
  the budget costs, the run stops at the cap: calls and proposals shrink to what it affords.
- **proposals**: the calls left to the search (the budget less the baseline's ``T + H``, the
  winner's ``H``, its selection on val) over what a proposal costs. One at a time, its child's
  minibatch gate (``m``) and, for the share ``p`` of children that pass it, the rest of train
  (``T - m``); ``p`` is the sample children's, ``(passed + 1) / (n + 2)`` of ``n`` that beat the
  baseline on the sample seeds (1/2 with none). With ``K`` in flight, the children written
  together are stacked and scored on train once (:mod:`optimizer.gepa.stacking`): ``T / K``
  each. A stack no better than its base costs each child's own gate as well; stacks are
  assumed better (they add ``K`` fixes at once), so a search whose stacks fail makes fewer
  proposals than planned, and takes less of the reflection model's time.
- **reflection calls and tokens, dollars**: the sample proposals' means, once per proposal;
  the student's tokens and dollars, the sample rollouts' means, once per container call;
  both models priced by one table (:mod:`transport.pricing`), ``None`` where unknown.
- **wall time**: the process's start, as the plan's own took; the baseline's train rollouts;
  the search; the winner's holdout (and val) rollouts. With one proposal in flight the search
  writes a proposal, then judges its child (its gate and, ``p`` of the time, its train
  evaluation), then writes the next; with ``K`` in flight, children are judged in the
  background while their workers write again, so the search takes ``proposals / K`` writings
  (and the last child's judging). The container may be slower still: every search rollout
  through the slots. ``n`` rollouts take ``ceil(n / slots)`` rollout latencies, ``slots`` the
  concurrency, or fewer when the sample showed the container answering fewer at once.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from optimizer.runtime.accounts.plan import RunPlan

__all__ = [
    "ACCEPTED",
    "Figure",
    "Forecast",
    "Run",
    "Samples",
    "forecast",
    "parallel_slots",
    "pass_share",
    "rollouts_per_proposal",
]

ACCEPTED = 0.5  # the share of children assumed to pass their gate with no sample child scored
OVERHEAD_S = 0.5  # reading the program, writing the evidence


@dataclass(frozen=True)
class Samples:
    """What ``optimize plan`` measured: ``rollouts`` baseline rollouts (one alone, first, to
    pay any cold start; then two rounds with ``together`` in flight, the first answered after
    ``latency_s``, answered ``parallel`` at a time), ``proposals``
    proposals written ``in_flight`` at a time (``proposal_s`` each, on the mean), and of
    ``children`` distinct children scored on the sample seeds, ``passed`` beat the baseline."""

    rollouts: int
    latency_s: float
    together: int
    parallel: float
    student_input_tokens: float  # per rollout, means
    student_output_tokens: float
    student_cost_usd: float | None  # per rollout; None: unknown
    proposals: int = 0
    proposal_s: float | None = None  # None: no proposal was written
    reflection_calls: float = 1.0  # per proposal, means
    reflection_input_tokens: float = 0.0
    reflection_output_tokens: float = 0.0
    reflection_cost_usd: float | None = None
    children: int = 0
    passed: int = 0
    startup_s: float = 0.0  # the plan's own process start


@dataclass(frozen=True)
class Figure:
    """One predicted figure and the assumption it rests on (``value`` None: unknown)."""

    value: float | None
    assumption: str


@dataclass(frozen=True)
class Forecast:
    """The figures of a plan, each with its assumption."""

    container_calls: Figure
    proposals: Figure
    reflection_calls: Figure
    reflection_tokens: Figure
    student_tokens: Figure
    student_usd: Figure
    reflection_usd: Figure
    total_usd: Figure
    wall_s: Figure
    limited_by: str  # "metric calls", "cost" or "no search"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: ``forecast.json`` and the evidence packet's ``forecast``."""
        return asdict(self)


def parallel_slots(samples: Samples, concurrency: int) -> float:
    """Rollouts in flight at once: the concurrency, or what the container managed when the
    sample sent ``together`` at once and it answered clearly fewer (a one-at-a-time server)."""
    if samples.together <= 1 or samples.parallel >= 0.6 * samples.together:
        return float(concurrency)
    return max(1.0, min(float(concurrency), samples.parallel))


def pass_share(samples: Samples) -> float:
    """The share of children assumed to pass their gate: the sample's, pulled toward 1/2."""
    if samples.children == 0:
        return ACCEPTED
    return (samples.passed + 1) / (samples.children + 2)


def rollouts_per_proposal(samples: Samples, minibatch: int, train: int, in_flight: int) -> float:
    """What one proposal costs the search in rollouts (module docstring)."""
    if in_flight <= 1:
        return minibatch + pass_share(samples) * (train - minibatch)
    return train / in_flight


@dataclass(frozen=True)
class Run:
    """The sizes of the run the figures are made of."""

    limit: int
    minibatch: int
    in_flight: int
    concurrency: int
    max_cost_usd: float | None = None

    def search_calls(self, plan: RunPlan) -> int:
        """The budget left to the search: less the baseline, the winner's holdout, val."""
        if not plan.search:
            return 0
        val = (plan.top_k + 1) * len(plan.val) if plan.selection_split == "val" else 0
        return max(0, self.limit - len(plan.train) - 2 * len(plan.holdout) - val)


def forecast(samples: Samples, plan: RunPlan, run: Run) -> Forecast:
    """The figures of ``run`` under ``plan`` (module docstring)."""
    m, t, k = min(run.minibatch, len(plan.train)), len(plan.train), max(run.in_flight, 1)
    if plan.search:
        calls = float(run.limit)
        proposals = run.search_calls(plan) / rollouts_per_proposal(samples, m, t, k)
        limited = "metric calls"
    else:  # the baseline alone, and the one proposal a budget too small to search still writes
        calls, proposals, limited = float(t + len(plan.holdout)), 1.0, "no search"
    total = (samples.student_cost_usd or 0.0) * calls + (
        samples.reflection_cost_usd or 0.0
    ) * proposals
    if run.max_cost_usd is not None and total > run.max_cost_usd:
        cut = run.max_cost_usd / total  # the run stops at the cap, both models together
        calls, proposals, limited = calls * cut, proposals * cut, "cost"
    return _figures(samples, run, plan, calls, proposals, limited)


def _times(n: float, each: float | None) -> float | None:
    return None if each is None else n * each


def _figures(
    samples: Samples, run: Run, plan: RunPlan, calls: float, proposals: float, limited: str
) -> Forecast:
    m, t = min(run.minibatch, len(plan.train)), len(plan.train)
    per_call = samples.student_input_tokens + samples.student_output_tokens
    per_proposal = samples.reflection_input_tokens + samples.reflection_output_tokens
    student_usd = _times(calls, samples.student_cost_usd)
    reflection_usd = _times(proposals, samples.reflection_cost_usd)
    total = None if student_usd is None or reflection_usd is None else student_usd + reflection_usd
    cap = f"; --max-cost-usd {run.max_cost_usd:g} stops the run first" if limited == "cost" else ""
    passed = f"{samples.passed} of {samples.children} sample children beat the baseline"
    return Forecast(
        container_calls=Figure(
            round(calls),
            f"the whole budget of {run.limit} metric calls is spent (an upper bound when a "
            f"stop condition ends the search sooner){cap}"
            if plan.search
            else f"the baseline alone: {run.limit} metric calls are too few to search "
            f"({'; '.join(plan.skipped)})",
        ),
        proposals=Figure(
            round(proposals, 1),
            f"{rollouts_per_proposal(samples, m, t, run.in_flight):.1f} rollouts each: "
            + (
                f"the {run.in_flight} written at once are stacked and scored on the {t} train "
                "seeds once (a stack is assumed better than its base)"
                if run.in_flight > 1
                else f"a child costs its {m}-seed gate and, {pass_share(samples):.0%} of the "
                f"time ({passed}), {t - m} train rollouts more"
            ),
        ),
        reflection_calls=Figure(
            round(proposals * samples.reflection_calls),
            f"{samples.reflection_calls:g} call(s) per proposal, as the sample proposals took",
        ),
        reflection_tokens=Figure(
            round(proposals * per_proposal),
            f"{per_proposal:.0f} tokens per proposal, as the sample proposals used",
        ),
        student_tokens=Figure(
            round(calls * per_call),
            f"{per_call:.0f} tokens per rollout, the sample rollouts' mean as the container "
            "reported it",
        ),
        student_usd=Figure(student_usd, _priced("rollout", samples.student_cost_usd)),
        reflection_usd=Figure(reflection_usd, _priced("proposal", samples.reflection_cost_usd)),
        total_usd=Figure(total, "student plus reflection; unknown when either is"),
        wall_s=Figure(
            round(_wall(samples, run, plan, calls, proposals), 1), _wall_note(samples, run)
        ),
        limited_by=limited,
    )


def _priced(what: str, each: float | None) -> str:
    if each is None:
        return "unknown: no price for the model (give one with --prices)"
    return f"${each:.6g} per {what}, the samples' mean"


def _wall(samples: Samples, run: Run, plan: RunPlan, calls: float, proposals: float) -> float:
    slots = parallel_slots(samples, run.concurrency)
    latency, k = samples.latency_s, max(run.in_flight, 1)
    m, t = min(run.minibatch, len(plan.train)), len(plan.train)

    def rounds(n: float) -> float:
        return math.ceil(n / slots) * latency if n > 0 else 0.0

    final = rounds(len(plan.holdout))
    if plan.selection_split == "val":
        final += (plan.top_k + 1) * rounds(len(plan.val))
    writing = samples.proposal_s or 0.0
    if not plan.search:
        return samples.startup_s + OVERHEAD_S + rounds(t) + writing + final
    search_calls = max(0.0, calls - (run.limit - run.search_calls(plan)))
    # One at a time, a child is judged before the next proposal is asked for; with several in
    # flight, children are judged in the background while their workers write again.
    one_by_one = proposals * (writing + rounds(m) + pass_share(samples) * rounds(t - m))
    overlapped = proposals * writing / k + rounds(t)
    search = max(one_by_one if k == 1 else overlapped, search_calls * latency / slots)
    return samples.startup_s + OVERHEAD_S + rounds(t) + search + final


def _wall_note(samples: Samples, run: Run) -> str:
    slots = parallel_slots(samples, run.concurrency)
    writing = "not measured" if samples.proposal_s is None else f"{samples.proposal_s:.1f} s"
    return (
        f"a rollout takes {samples.latency_s:.2f} s and {slots:g} run at once; a proposal "
        f"takes {writing} with {run.in_flight} written at once"
        + (" (stacks judged while the next are written)" if run.in_flight > 1 else "")
        + f"; the search waits on the slower of the two; starting the process took "
        f"{samples.startup_s:.1f} s"
    )
