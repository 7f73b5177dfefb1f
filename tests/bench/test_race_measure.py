"""The race's processes: a contestant's peak RSS is its own, a stopped race stops them all, and
a contestant of ours runs the code of the checkout the race lives in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


def _children(pid: int) -> set[int]:
    """The pids whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _started_here(pid: int, *marks: Path) -> bool:
    """Whether ``pid``'s command line names one of ``marks`` (the bench, this test's folder)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return any(str(mark) in cmdline for mark in marks)


def test_a_race_stopped_by_sigterm_stops_every_process_it_started(tmp_path: Path) -> None:
    # The container, the reflection model and the contestant are the race's children; a
    # SIGTERM to the race alone (as a supervisor sends) used to leave all three running.
    race_py = Path(race.__file__)
    proc = subprocess.Popen(
        [sys.executable, str(race_py), "--tasks", "additive", "--seeds", "0"]
        + ["--contestants", "ours-1", "--no-compile", "--keep", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(children := _children(proc.pid)) < 3:  # container, reflector, contestant
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in children if _alive(pid)]
    finally:  # a failing run leaves nothing behind either (pids checked: never another's)
        for pid in [proc.pid, *children]:
            if _alive(pid) and _started_here(pid, race_py.parent, tmp_path):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def test_a_contestant_of_ours_imports_the_races_checkout_first(tmp_path: Path) -> None:
    # Another ``optimizer`` package is found first on the path given to the race (as the venv
    # of another checkout, shared by a git worktree, points at that checkout's packages): the
    # contestant still runs this checkout's code.
    decoy = tmp_path / "optimizer"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("")
    env = race.checkout_env({**os.environ, "PYTHONPATH": str(tmp_path)})
    found = subprocess.run(
        [sys.executable, "-c", "import optimizer; print(optimizer.__file__)"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(found.stdout.strip()) == race.ROOT / "optimizer" / "__init__.py"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(race.ROOT), str(tmp_path)]


def test_race_seeds_take_lists_and_ranges_and_refuse_what_is_neither() -> None:
    # ``--seeds 10-33`` used to end in a traceback (int('10-33')).
    assert race._seeds("0,1,2") == [0, 1, 2]
    assert race._seeds("10-13,20") == [10, 11, 12, 13, 20]
    for bad in ("10-x", "5-3", ""):
        done = subprocess.run(
            [sys.executable, str(Path(race.__file__)), "--seeds", bad],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2
        assert "argument --seeds" in done.stderr and "Traceback" not in done.stderr
