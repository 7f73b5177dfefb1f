"""A one-line progress display fed by run events: phase, paid calls / budget, best so far,
the adaptive concurrency limit while 429/503 answers hold it below ``--concurrency``, and
whether a person paused the run."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from schemas import Event

__all__ = ["ProgressBar"]

WIDTH = 24


class ProgressBar:
    """Redraws one line on a terminal; on a pipe, prints a line per notable change."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stderr
        self._tty = self._out.isatty()
        self.phase = "starting"
        self.paid = 0
        self.cached = 0
        self.limit: int | None = None
        self.best: float | None = None
        self.candidates = 0
        self.in_flight: tuple[int, int] | None = None  # (limit, --concurrency) while cut
        self.paused = False  # a person paused the run (``action_applied`` events)
        self._last = 0.0

    def __call__(self, event: Event) -> None:
        data = event.data
        notable = False
        if event.type == "phase":
            self.phase, notable = str(data.get("phase")), True
        elif event.type == "program":
            self.limit = data.get("budget", {}).get("max_metric_calls")
        elif event.type == "trials":
            budget = data.get("budget", {})
            self.paid, self.cached = int(budget.get("paid", 0)), int(budget.get("cached", 0))
            self.limit = budget.get("limit", self.limit)
        elif event.type == "candidate":
            self.candidates += 1
        elif event.type == "concurrency" and data.get("limit") is not None:
            limit, top = int(data["limit"]), int(data.get("max") or data["limit"])
            self.in_flight = (limit, top) if limit < top else None
        elif event.type == "action_applied":
            self.paused, notable = bool(data.get("paused")), True
        elif event.type == "frontier" and data.get("best"):
            self.best, notable = float(data["best"]["mean"]), True
        elif event.type == "scored" and self.best is None and data.get("mean") is not None:
            self.best, notable = float(data["mean"]), True
        self._draw(force=notable)

    def line(self) -> str:
        """The current status line."""
        if self.limit:
            filled = min(WIDTH, int(WIDTH * self.paid / self.limit))
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.paid}/{self.limit} paid"
        else:
            bar = f"{self.paid} paid"
        best = "n/a" if self.best is None else f"{self.best:.3f}"
        limit = f" | in flight <= {self.in_flight[0]}/{self.in_flight[1]}" if self.in_flight else ""
        phase = f"{self.phase} (paused)" if self.paused else self.phase
        return (
            f"{phase:<20} {bar}, {self.cached} cached | candidates {self.candidates} "
            f"| best train {best}{limit}"
        )

    def _draw(self, *, force: bool) -> None:
        now = time.monotonic()
        if self._tty:
            if force or now - self._last > 0.1:
                self._out.write("\r" + self.line()[:150].ljust(150))
                self._out.flush()
                self._last = now
        elif force or now - self._last > 10:
            self._out.write(self.line() + "\n")
            self._out.flush()
            self._last = now

    def note(self, text: str) -> None:
        """Print a line of its own (a warning) without tearing the progress line apart."""
        if self._tty:
            self._out.write("\r" + " " * 150 + "\r" + text + "\n")
            self._draw(force=True)
        else:
            self._out.write(text + "\n")
        self._out.flush()

    def close(self) -> None:
        """End the line on a terminal."""
        if self._tty:
            self._out.write("\n")
            self._out.flush()
