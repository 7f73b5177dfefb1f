"""Progress of a long install on the terminal: one line per step, with the time since it began.

The parts of one install (the runtime's build and each model's download) run at once, in
threads, and report to one ``Progress``: ``step`` for a new stage (always shown), ``count`` for
how far a stage has got, kept to one line every few seconds per part so that a log stays
readable: ``[  1:23] runtime: compiling llama.cpp 57/120``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

__all__ = ["Progress", "print_line"]


def print_line(line: str) -> None:
    """Write ``line`` to stdout at once (a pipe would otherwise hold it until the end)."""
    print(line, file=sys.stdout, flush=True)


class Progress:
    """Lines ``[m:ss] part: message`` through ``write``; ``count`` lines at most every ``every`` s.

    ``clock`` (default ``time.monotonic``) is read once at construction and at each line.
    """

    def __init__(
        self,
        write: Callable[[str], None] = print_line,
        *,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._every = every
        self._clock = clock
        self._started = clock()
        self._last_count: dict[str, float] = {}
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since this progress began."""
        return self._clock() - self._started

    def step(self, part: str, message: str) -> None:
        """Show that ``part`` entered a new stage."""
        with self._lock:
            self._last_count.pop(part, None)
            self._emit(part, message)

    def count(self, part: str, message: str, done: int, total: int) -> None:
        """Show ``message done/total`` unless ``part`` showed a count less than ``every`` s ago.

        The last one (``done == total``) always shows.
        """
        with self._lock:
            now = self._clock()
            last = self._last_count.get(part)
            if done < total and last is not None and now - last < self._every:
                return
            self._last_count[part] = now
            self._emit(part, f"{message} {done}/{total}")

    def _emit(self, part: str, message: str) -> None:
        minutes, seconds = divmod(int(self.elapsed()), 60)
        self._write(f"[{minutes:3d}:{seconds:02d}] {part}: {message}")
