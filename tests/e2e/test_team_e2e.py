"""A team's workspace with real processes: runners on one PostgreSQL or one SQLite file.

- Four runners of one program started at once pay for no (candidate, seed) twice, as the
  container counts.
- A runner killed with SIGKILL while it holds claims: the others take them over within the
  lease, and every one of its rollouts ends stored; only what it had in flight is paid again.
- PostgreSQL restarted twice under a run (on a server of the test's own): the run completes
  with the same evidence as an undisturbed run, nothing paid twice, no errored rollout; a
  server gone past the outage limit stops the run with a clear error, and it resumes by id.
- Four runners at ``--concurrency 32`` against one container of hidden capacity 4 share one
  limit: once it converged, goodput of at least 0.9 x capacity / latency and under 5% 429s.

The drivers are :mod:`optimizer.testing.team`'s, which ``bench/team.py`` prints the figures of.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.testing.postgres import PrivateServer, private_server, private_server_missing
from optimizer.testing.team import (
    away_prefix,
    killed_runner,
    restarted_run,
    same_program,
    shared_limit,
    stopped_run,
)
from tests.postgres import unavailable

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_store_url"))
    return str(tmp_path / "ws")


@pytest.fixture(scope="module")
def server() -> Iterator[PrivateServer]:
    missing = private_server_missing()
    if missing is not None:
        unavailable(missing)
    with private_server() as started:
        yield started


def test_four_runners_of_one_program_at_once_pay_for_nothing_twice(
    store: str, tmp_path: Path
) -> None:
    team = same_program(store, tmp_path, runners=4)
    assert team.codes == [0, 0, 0, 0], team.errors
    assert team.calls and team.paid_twice == set()
    counts = list(team.counts.values())
    assert len(counts) == 4 and all(c["errors"] == 0 for c in counts)
    # Every call the container served is one paid trial of one of the runs.
    assert sum(c["paid"] for c in counts) == len(team.calls)
    assert all(c["paid"] + c["cached"] == counts[0]["paid"] + counts[0]["cached"] for c in counts)


@pytest.mark.parametrize("where", ["this host", "another host"])
def test_a_killed_runners_claims_are_taken_over_within_the_lease(
    store: str, tmp_path: Path, where: str
) -> None:
    away = None
    if where == "another host":
        away = away_prefix("gepa-away")
        if away is None:
            pytest.skip("unshare --uts is not permitted here (needs root): cannot fake a host")
    killed = killed_runner(store, tmp_path, away=away, lease_timeout_s=4.0)
    assert killed.team.codes == [0, 0, 0], killed.team.errors
    assert killed.taken_over_s is not None
    # A dead pid here is seen at the next look; a silent host once its heartbeat is too old.
    assert killed.taken_over_s <= killed.lease_timeout_s + 2.0, killed.taken_over_s
    assert killed.stored == len(killed.held) >= 3  # 0 lost
    # Paid again: only among the killed runner's claims (rollouts it had sent but not stored;
    # how many depends on where the kill lands: in flight, or answered and awaiting the commit).
    assert killed.team.paid_twice <= killed.held_pairs


def test_two_postgres_restarts_under_a_run_change_nothing(
    server: PrivateServer, tmp_path: Path
) -> None:
    run = restarted_run(server, tmp_path, at=(30, 90))
    assert len(run.restarts) == 2, run.stderr
    assert run.status == "completed" and run.differences == [], (run.differences, run.stderr)
    assert (run.paid_twice, run.errors) == (0, 0)
    assert run.calls == run.calm_calls
    # Each restart is said once; what the server said depends on where it cut the run in
    # (a statement terminated, a connection closed, the server starting up).
    assert run.stderr.count("went away (") == 2, run.stderr


def test_a_server_gone_past_the_limit_stops_the_run_which_resumes_by_id(
    server: PrivateServer, tmp_path: Path
) -> None:
    run = stopped_run(server, tmp_path, limit_s=3.0)
    assert run.code == 1
    assert "StoreUnreachable" in run.stderr and "past the limit of 3 s" in run.stderr, run.stderr
    assert "resume the run by id (gepa-runtime optimize run RUN_ID)" in run.stderr
    assert run.resumed_code == 0, run.resumed_stderr
    assert run.status == "completed"
    # Paid again: rollouts in flight when the server went, or sent before the runner saw it
    # go (4 workers); none is sent while the server is out of reach.
    assert len(run.paid_again) <= 12


def test_four_runners_share_one_limit_of_a_hidden_capacity(store: str) -> None:
    if os.cpu_count() == 1:
        pytest.skip("four runners and a container need more than one core to be measured")
    run = shared_limit(store, runners=4, capacity=4, latency=0.2, concurrency=32, candidates=3)
    assert run.errors == 0 and run.paid == 4 * 3 * 36
    assert run.converged_s is not None and run.window_s >= 6.0, run
    assert run.goodput >= 0.9 * 4 / 0.2, run
    assert run.refused < 0.05, run
