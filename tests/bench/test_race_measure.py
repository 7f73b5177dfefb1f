"""The race's per-contestant figures: a contestant's peak RSS is its own, not the race's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import race  # noqa: E402

CHILD = (
    "import time\n"
    "block = bytearray(40 * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096):\n"
    "    block[i] = 1\n"
    "time.sleep(0.3)\n"
)


def test_a_contestants_peak_rss_is_its_own_not_the_races() -> None:
    # The race itself holds 200 MB when it starts a contestant that touches 40 MB. Linux's
    # wait4 counts a child's peak from its parent's at the fork, which reported 200+ MB.
    held = bytearray(200 * 1024 * 1024)
    for i in range(0, len(held), 4096):
        held[i] = 1
    done = race._measured([sys.executable, "-c", CHILD], dict(os.environ))
    assert done.returncode == 0
    assert 40 <= done.peak_rss_mb < 120
    assert done.cpu_s > 0
    del held
