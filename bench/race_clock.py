"""The clock of a gepa-ai race run that may span sittings (``bench/race_gepa.py --run-dir``).

Stdlib only: it runs under the gepa venv's interpreter (``bench/gepa_env.py``), beside
``race_gepa.py``, and nothing of ours is imported there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

__all__ = ["ClockError", "RunClock"]


class ClockError(RuntimeError):
    """``race_clock.json`` exists but cannot be read; the message says how to start over."""


class RunClock:
    """Search time and timeline that survive a stopped run, for ``--run-dir``.

    gepa saves its state in ``run_dir`` after every iteration and resumes from it; this keeps
    the seconds already spent and the timeline beside that state (``race_clock.json``), so a
    run stopped and resumed reports its whole wall time, not only the last process's. The time
    of the iteration in progress when a run is stopped is lost, and gepa redoes that iteration.
    """

    FILE = "race_clock.json"

    def __init__(self, run_dir: Path | None) -> None:
        self._path = run_dir / self.FILE if run_dir else None
        saved: dict[str, Any] = {}
        if self._path and self._path.exists():
            try:
                saved = json.loads(self._path.read_text())
            except ValueError as exc:
                raise ClockError(
                    f"{self._path} is not JSON ({exc}); delete it to start over"
                ) from exc
        self.earlier_s = float(saved.get("elapsed_s", 0.0))
        self.earlier_posts = int(saved.get("container_calls", 0))
        self.sessions = int(saved.get("sessions", 0)) + 1
        self.timeline = [(float(t), float(m)) for t, m in saved.get("timeline", [])]
        self.best_timeline = [(float(t), float(m)) for t, m in saved.get("best_timeline", [])]
        self.t0 = time.perf_counter() - self.earlier_s

    def now(self) -> float:
        """Seconds since the first session started, earlier sessions included."""
        return time.perf_counter() - self.t0

    def save(self, posts: int) -> None:
        """Write elapsed time, container calls (``posts`` in this session) and timeline next
        to gepa's state (atomically)."""
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "elapsed_s": round(self.now(), 3),
                    "sessions": self.sessions,
                    "container_calls": self.earlier_posts + posts,
                    "timeline": [[round(t, 3), m] for t, m in self.timeline],
                    "best_timeline": [[round(t, 3), m] for t, m in self.best_timeline],
                }
            )
        )
        tmp.replace(self._path)
