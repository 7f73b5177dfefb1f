"""``gepa-runtime runs pause | resume | reject | pin | unpin | note | stop``: what each prints,
what it records, and its refusals (exit code 2, naming the fix)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.cli import main
from optimizer.cli.optimize import _console
from optimizer.runtime.lifecycle.progress import ProgressBar
from schemas import CandidateRecord, Event, RunConfig
from workspace import Workspace

BASE, CHILD = "ba5e000000000000", "c41d000000000000"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A workspace with a run that has a baseline and one child."""

    async def create() -> str:
        async with Workspace(tmp_path / "ws") as ws:
            run_id = (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id
            for cid, origin in ((BASE, "seed"), (CHILD, "mutation")):
                await ws.add_candidate(
                    CandidateRecord(
                        run_id=run_id,
                        candidate_id=cid,
                        content_hash=cid * 4,
                        components={"p": cid},
                        origin=origin,  # type: ignore[arg-type]
                    )
                )
            return run_id

    yield tmp_path / "ws", asyncio.run(create())


def _cli(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main(["runs", *args, "--workspace", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def _actions(root: Path, run_id: str) -> list[Event]:
    async def read() -> list[Event]:
        async with Workspace(root, readonly=True) as ws:
            return await ws.events_since(run_id, types=("action",))

    return asyncio.run(read())


def test_each_command_records_its_action_and_says_what_the_run_does(
    capsys: pytest.CaptureFixture[str], run: tuple[Path, str]
) -> None:
    root, rid = run
    said = [
        _cli(capsys, root, "pause", rid),
        _cli(capsys, root, "pin", rid, "c41d"),
        _cli(capsys, root, "unpin", rid),
        _cli(capsys, root, "note", rid, "look at refunds", "--candidate", CHILD),
        _cli(capsys, root, "reject", rid, CHILD, "--reason", "games the verifier"),
        _cli(capsys, root, "resume", rid),
        _cli(capsys, root, "stop", rid, "--reason", "good enough"),
    ]
    assert [code for code, _, _ in said] == [0] * 7
    outs = [out for _, out, _ in said]
    assert f"paused run {rid}: no new rollout or reflection starts" in outs[0]
    assert f"pinned candidate {CHILD} of run {rid}" in outs[1]
    assert "the candidate selector chooses the parents again" in outs[2]
    assert f"whose parent is {CHILD} or built on it" in outs[3]
    assert "until a candidate written with it is accepted on train" in outs[3]
    assert f"rejected candidate {CHILD} of run {rid}" in outs[4]
    assert f"resumed run {rid}" in outs[5] and "stops searching" in outs[6]
    # Nobody runs the run now: it takes the actions in when it is resumed.
    assert all(f"gepa-runtime optimize run {rid}" in out for out in outs)
    recorded = [e.data for e in _actions(root, rid)]
    assert [d["action"] for d in recorded] == [
        "pause", "pin", "unpin", "note", "reject", "resume", "stop",
    ]  # fmt: skip
    assert all(d["source"] == "cli" for d in recorded)
    assert recorded[1]["candidate_id"] == CHILD  # the prefix resolved to the full id
    assert recorded[3] == {
        "action": "note", "source": "cli", "text": "look at refunds", "candidate_id": CHILD,
        "keep": False,
    }  # fmt: skip


def test_json_prints_the_stored_event_and_the_steering(
    capsys: pytest.CaptureFixture[str], run: tuple[Path, str]
) -> None:
    root, rid = run
    code, out, _ = _cli(capsys, root, "note", rid, "keep it short", "--keep", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["event"]["type"] == "action" and document["event"]["run_id"] == rid
    note = document["steering"]["notes"][0]
    assert note["text"] == "keep it short" and note["keep"] is True and note["source"] == "cli"


def test_refusals_exit_2_naming_the_fix_and_record_nothing(
    capsys: pytest.CaptureFixture[str], run: tuple[Path, str], tmp_path: Path
) -> None:
    root, rid = run
    for args, says in [
        (("resume", rid), "is not paused: nothing to resume"),
        (("unpin", rid), "nothing to unpin"),
        (("reject", rid, BASE, "--reason", "x"), "is the baseline"),
        (("pin", rid, "ffff"), f"run {rid} has no candidate 'ffff'"),
        (("pause", "run-nope"), "unknown run 'run-nope': list the runs"),
        (("note", rid, "  "), "text: note needs a non-empty text"),
    ]:
        code, _, err = _cli(capsys, root, *args)
        assert code == 2, args
        assert err.startswith("error: ") and says in err, err
    assert _actions(root, rid) == []
    code, _, err = _cli(capsys, tmp_path / "nowhere", "pause", rid)
    assert code == 2 and "no workspace at" in err


def test_a_missing_argument_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], run: tuple[Path, str]
) -> None:
    root, rid = run
    with pytest.raises(SystemExit) as exited:
        main(["runs", "reject", rid, CHILD, "--workspace", str(root)])
    assert exited.value.code == 2
    assert "the following arguments are required: --reason" in capsys.readouterr().err


def test_a_run_in_this_terminal_shows_the_actions_it_takes_in(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = ProgressBar(stream=io.StringIO())
    applied = {"action": "pause", "source": "console", "candidate_id": None, "paused": True}
    bar(Event(seq=1, run_id="r", type="action_applied", data=applied))
    assert bar.line().startswith("starting (paused)")
    bar(Event(seq=2, run_id="r", type="action_applied", data={**applied, "paused": False}))
    assert bar.line().startswith("starting ")
    assert "(paused)" not in bar.line()
    listener = _console(None)
    rejected = {"action": "reject", "source": "cli", "candidate_id": CHILD, "paused": False}
    listener(Event(seq=3, run_id="r", type="action_applied", data=rejected))
    assert capsys.readouterr().err == f"steered: reject {CHILD} (from the cli)\n"
