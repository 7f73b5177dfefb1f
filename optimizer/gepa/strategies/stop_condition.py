"""Stop conditions: when the search ends and the run goes on to promotion.

The search records what it observes in one :class:`SearchProgress` (proposals written,
candidates made, iterations that made nothing, the best train mean and when it last rose,
what the budget and the failure ledger say) at the moments it observes it, and asks its
conditions after each; the first reason given stops the search (the reason is shown in the
events, the report and the evidence packet). Conditions compose (:class:`CompositeStopper`,
as gepa-ai's), and any object with a ``reason_to_stop(progress)`` method is one.

Always on: the budget (``--max-metric-calls``, ``--max-cost-usd``), full marks on every train
seed, ``--patience`` proposals without a better best (0: off), ``--max-idle-iterations`` that
made no candidate, the two rules that end a search with nothing left to try
(:data:`CONVERGED`, :data:`NOTHING_TO_FIX`), and a person's stop (:class:`StoppedByPerson`:
``gepa-runtime runs stop``, the console, the REST API). Chosen by flags: ``--timeout SECONDS``,
``--stop-after-no-improvement N`` candidates, ``--score-threshold X`` (best train mean),
``--stop-file PATH``; a ``SIGUSR1`` to the process running the search
(:class:`SignalStopper`, on in the CLI). Time the run spent paused does not count toward
``--timeout``.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "CONVERGED",
    "NOTHING_TO_FIX",
    "CompositeStopper",
    "Converged",
    "FullMarks",
    "IdleIterations",
    "MetricCallBudget",
    "NoImprovement",
    "NothingToFix",
    "Patience",
    "Perfect",
    "ScoreThreshold",
    "SearchProgress",
    "SignalStopper",
    "StopCondition",
    "StopFile",
    "StoppedByPerson",
    "Timeout",
]

CONVERGED = (
    "nothing left to show: every failure of every frontier candidate was shown to the "
    "reflection model, which proposed nothing new for the candidates not built on since"
)
NOTHING_TO_FIX = (
    "nothing to fix in the best: every failure of {best} (and of the candidates that tie it) "
    "was shown to the reflection model, which found nothing more to change, and every other "
    "frontier candidate scores below it on train"
)


@dataclass(frozen=True)
class Perfect:
    """A candidate that scored full marks on every train seed; ``best`` names the best when
    it is not that candidate (an unproven deletion is never the best)."""

    candidate_id: str
    best: str | None = None


@dataclass
class SearchProgress:
    """What the search has observed so far, as its stop conditions read it."""

    started: float = field(default_factory=time.monotonic)
    proposals: int = 0  # proposals written (answered by the reflection model)
    # The best train mean as the proposals last saw it, and proposals written since it rose
    # (``--patience``: taken when a proposal is written, so a child accepted in the
    # background counts for the proposals written meanwhile).
    proposals_best_mean: float | None = None
    proposals_since_improvement: int = 0
    candidates: int = 0  # candidates the search stored (proposals, merges, stacks)
    candidates_since_improvement: int = 0
    best_mean: float | None = None  # the best train mean, as last scored
    idle_iterations: int = 0  # iterations in a row that made no candidate
    budget: str | None = None  # why the budget allows no new iteration (seen at its start)
    perfect: Perfect | None = None
    converged: bool = False  # every frontier member retired, nothing in flight
    nothing_to_fix_in: str | None = None  # the best, when nothing is left to fix in it
    paused_s: float = 0.0  # seconds a person held the run paused since the search started
    stop_request: str | None = None  # why a person stopped the search, if one did

    @property
    def elapsed_s(self) -> float:
        """Seconds since the search started, the time it was paused left out."""
        return time.monotonic() - self.started - self.paused_s


@runtime_checkable
class StopCondition(Protocol):
    """Says why the search should stop now, or ``None``."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """A reason (shown to the user), or ``None`` to go on."""
        ...


class CompositeStopper:
    """Several conditions: the first that gives a reason stops the search."""

    def __init__(self, *conditions: StopCondition) -> None:
        self.conditions = conditions

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """The first reason any condition gives."""
        for condition in self.conditions:
            reason = condition.reason_to_stop(progress)
            if reason:
                return reason
        return None


class MetricCallBudget:
    """The budget allows no new iteration (its reason, as seen when one was to start)."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        return progress.budget


class FullMarks:
    """A candidate scored full marks on every train seed: nothing can beat it."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        perfect = progress.perfect
        if perfect is None:
            return None
        reason = f"{perfect.candidate_id} scores full marks on every train seed"
        if perfect.best is not None:  # an unproven deletion: its parent's failures were slips
            reason += f" (it only dropped text and did not prove it: {perfect.best} stays the best)"
        return reason


class Patience:
    """``n`` proposals in a row were written without a better best train mean.

    Counted when a proposal is written, reset when the best train mean rises (a child
    accepted in the background counts for the proposals written meanwhile): a search whose
    best has stopped moving would otherwise spend its budget on reflections and gates that
    change nothing.
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        since = progress.proposals_since_improvement
        if self.n and since >= self.n:
            return (
                f"no better candidate in the last {since} proposals (--patience {self.n}; the "
                f"best train mean stayed {progress.proposals_best_mean or 0.0:.3f})"
            )
        return None


class NoImprovement:
    """``n`` candidates in a row were made without a better best train mean."""

    def __init__(self, n: int) -> None:
        self.n = n

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        since = progress.candidates_since_improvement
        if since >= self.n:
            return (
                f"no new best in the last {since} candidates (--stop-after-no-improvement "
                f"{self.n}; the best train mean stayed {progress.best_mean or 0.0:.3f})"
            )
        return None


class IdleIterations:
    """``n`` iterations in a row made no candidate."""

    def __init__(self, n: int) -> None:
        self.n = n

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        idle = progress.idle_iterations
        if idle >= self.n:
            return (
                f"no new candidate in {idle} iterations in a row "
                "(proposals rejected, duplicates, or parents already perfect)"
            )
        return None


class Converged:
    """Every failure of every frontier member was shown and nothing new came of it."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        return CONVERGED if progress.converged else None


class NothingToFix:
    """Nothing is left to fix in the best, and every other member scores below it."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        best = progress.nothing_to_fix_in
        return NOTHING_TO_FIX.format(best=best) if best is not None else None


class StoppedByPerson:
    """A person stopped the search (``gepa-runtime runs stop``, the console, the REST API):
    the run goes on to promotion with the best so far, as at any other stop."""

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        return progress.stop_request


class ScoreThreshold:
    """The best train mean reached ``threshold``."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        mean = progress.best_mean
        if mean is not None and mean >= self.threshold:
            return f"the best train mean {mean:.3f} reached --score-threshold {self.threshold}"
        return None


class Timeout:
    """The search has run for ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        if progress.elapsed_s >= self.seconds:
            return f"--timeout {self.seconds:g}s reached: the search ran {progress.elapsed_s:.0f}s"
        return None


class StopFile:
    """A file exists at ``path`` (``touch`` it to stop the search and promote the best)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        return f"stop file {self.path} found" if self.path.exists() else None


class SignalStopper:
    """A signal (``SIGUSR1`` unless told) reached the process: stop searching and promote.

    ``SIGINT`` and ``SIGTERM`` cancel a run (it resumes by id); this one ends the search the
    normal way, with promotion and its evidence packet. ``install`` takes the signal for the
    search's life (the main thread only); ``uninstall`` gives it back.
    """

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        self.signum = signum
        self._received = False
        self._previous: object = None

    def install(self) -> bool:
        """Take the signal; False where signals cannot be taken (another thread)."""
        try:
            self._previous = signal.signal(self.signum, self._handle)
        except ValueError:
            return False
        return True

    def uninstall(self) -> None:
        """Give the signal back to its previous handler."""
        if self._previous is not None:
            signal.signal(self.signum, self._previous)  # type: ignore[arg-type]
            self._previous = None

    def _handle(self, signum: int, frame: object) -> None:
        self._received = True

    def reason_to_stop(self, progress: SearchProgress) -> str | None:
        """See the class docstring."""
        if self._received:
            return f"signal {signal.Signals(self.signum).name} received"
        return None
