"""Budgets: paid metric calls and dollars, and the ``--auto`` formula.

``--auto light|medium|heavy`` derives the metric-call budget from the split sizes::

    N = T + H                      # baseline on train (T seeds) and holdout (H seeds)
      + P * (m + ceil(T / 2))      # P proposals: the child on a minibatch of m (its parent,
                                   # on the frontier, is already scored there) and about half
                                   # of the children promoted to a full train evaluation
      + H                          # the winner on holdout, which measures the lift
      + (k + 1) * V                # with val seeds only: top-k and the baseline scored on val

with P = 12 (light), 24 (medium), 48 (heavy); m = ``--minibatch-size``; k = ``holdout_top_k``;
V = validation seeds (when the program has any, the winner is chosen on them; else on its
train scores). Cache hits are free, so a real run usually pays for less than N.

The search may spend everything but what the end of the run will still need
(``Budget.reserve_final``, kept up to date by the search from the frontier: nothing while no
candidate beats the baseline, the winner's holdout seeds once one does). Budgets too small for
a full run are scaled down by ``optimizer.runtime.accounts.plan.plan_run``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schemas import BudgetExhausted, RunConfig, UserError

__all__ = [
    "AUTO_PROPOSALS",
    "Budget",
    "auto_metric_calls",
    "resolve_metric_calls",
]

AUTO_PROPOSALS = {"light": 12, "medium": 24, "heavy": 48}


def auto_metric_calls(
    level: str, *, train: int, holdout: int, val: int, minibatch: int, top_k: int
) -> int:
    """The ``--auto`` metric-call budget (formula in the module docstring)."""
    if level not in AUTO_PROPOSALS:
        raise UserError(f"--auto must be one of light, medium, heavy (got {level!r})")
    proposals = AUTO_PROPOSALS[level]
    m = min(minibatch, train)
    return (
        train
        + holdout
        + proposals * (m + math.ceil(train / 2))
        + holdout
        + ((top_k + 1) * val if val else 0)
    )


def resolve_metric_calls(config: RunConfig, *, train: int, holdout: int, val: int) -> int | None:
    """The metric-call limit of a run: explicit, from ``auto``, or None (no limit)."""
    if config.max_metric_calls is not None:
        return config.max_metric_calls
    if config.auto is not None:
        return auto_metric_calls(
            config.auto,
            train=train,
            holdout=holdout,
            val=val,
            minibatch=config.minibatch_size,
            top_k=config.holdout_top_k,
        )
    return None


@dataclass
class Budget:
    """Counts paid rollouts and dollars against the limits. Mutated by one event loop only.

    ``reserve(n)`` books slots before rollouts are sent so that concurrent proposals
    cannot overshoot together; ``settle`` turns a booking into a paid call.
    """

    max_calls: int | None = None
    max_cost_usd: float | None = None
    reserve_final: int = 0
    paid: int = 0
    cached: int = 0
    errors: int = 0
    retries: int = 0
    student_cost_usd: float = 0.0
    student_cost_unknown: int = 0  # paid rollouts whose dollars no price table knew (as $0)
    student_input_tokens: int = 0
    student_output_tokens: int = 0
    proposer_cost_usd: float = 0.0
    booked: int = field(default=0)

    @property
    def cost_usd(self) -> float:
        """Student plus proposer spend so far."""
        return self.student_cost_usd + self.proposer_cost_usd

    def search_room(self) -> int | None:
        """Paid calls the search may still book (None: unlimited)."""
        if self.max_calls is None:
            return None
        return self.max_calls - self.reserve_final - self.paid - self.booked

    def final_room(self) -> int | None:
        """Paid calls the end of the run may still book, reserve included (None: unlimited)."""
        if self.max_calls is None:
            return None
        return self.max_calls - self.paid - self.booked

    def check_search(self) -> None:
        """Raise ``BudgetExhausted`` when the search may not start more work."""
        room = self.search_room()
        if room is not None and room <= 0:
            raise BudgetExhausted(
                f"metric-call budget reached ({self.paid} paid of {self.max_calls})"
            )
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            raise BudgetExhausted(
                f"cost budget reached (${self.cost_usd:.4f} of ${self.max_cost_usd:.4f})"
            )

    def reserve(self, n: int, *, final: bool = False) -> None:
        """Book ``n`` paid calls; ``final`` draws on the heldout reserve too."""
        if n <= 0:
            return
        if not final:
            self.check_search()
            room = self.search_room()
            if room is not None and n > room:
                raise BudgetExhausted(
                    f"metric-call budget reached: {n} more rollouts needed, {room} left for search"
                )
        elif self.max_calls is not None and self.paid + self.booked + n > self.max_calls:
            raise BudgetExhausted(
                f"metric-call budget reached: {n} more rollouts needed for selection, "
                f"{self.max_calls - self.paid - self.booked} left"
            )
        self.booked += n

    def release(self, n: int) -> None:
        """Give back booked calls that were not spent (cache hits found late, cancellations)."""
        self.booked = max(0, self.booked - n)

    def settle(
        self,
        *,
        cost_usd: float | None,
        error: bool,
        retries: int,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        """One booked call was paid for; ``cost_usd=None``: its dollars are unknown (counted
        as 0 against ``max_cost_usd``, and apart)."""
        self.booked = max(0, self.booked - 1)
        self.paid += 1
        if cost_usd is None:
            self.student_cost_unknown += 1
        else:
            self.student_cost_usd += cost_usd
        self.student_input_tokens += input_tokens
        self.student_output_tokens += output_tokens
        self.retries += retries
        if error:
            self.errors += 1

    def snapshot(self) -> dict[str, float | int | None]:
        """Counters for events, the console and the evidence packet."""
        return {
            "paid": self.paid,
            "cached": self.cached,
            "errors": self.errors,
            "retries": self.retries,
            "limit": self.max_calls,
            "cost_usd": round(self.cost_usd, 6),
            "max_cost_usd": self.max_cost_usd,
            "student_cost_usd": round(self.student_cost_usd, 6),
            "student_cost_unknown": self.student_cost_unknown,
            "proposer_cost_usd": round(self.proposer_cost_usd, 6),
        }
