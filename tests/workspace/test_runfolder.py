"""The run folder: atomic writes that cannot escape it, and read-only refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemas import UserError, WorkspaceError
from workspace import Workspace


async def test_write_read_list_and_overwrite(ws: Workspace, run_id) -> None:
    folder = ws.run_dir(run_id)
    assert folder == ws.root / "runs" / run_id
    path = await ws.write_file(run_id, "report.md", "# Report\n")
    assert path == folder / "report.md" and path.read_text() == "# Report\n"
    await ws.write_file(run_id, "traces/seed-1.json", b'{"a": 1}')
    await ws.write_file(run_id, "report.md", "# Report v2\n")
    assert await ws.read_file(run_id, "report.md") == b"# Report v2\n"
    assert await ws.list_files(run_id) == ["report.md", "traces/seed-1.json"]
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(UserError, match="no file 'missing.md'"):
        await ws.read_file(run_id, "missing.md")


@pytest.mark.parametrize(
    "name", ["../escape.md", "a/../../escape.md", "/etc/passwd", "", ".", "dir/", "a\x00b"]
)
async def test_names_that_escape_the_folder_are_refused(ws: Workspace, run_id, name: str) -> None:
    with pytest.raises(UserError):
        await ws.write_file(run_id, name, "x")
    assert not (ws.root / "runs" / "escape.md").exists()


async def test_a_symlink_out_of_the_folder_is_refused(ws: Workspace, run_id, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    await ws.write_file(run_id, "keep.txt", "x")
    os.symlink(outside, ws.run_dir(run_id) / "link")
    with pytest.raises(UserError, match="escapes the run folder"):
        await ws.write_file(run_id, "link/pwned.txt", "x")
    assert list(outside.iterdir()) == []


async def test_read_only_workspace_refuses_every_write(tmp_path: Path, rollout) -> None:
    from schemas import CandidateRecord, RunConfig

    async with Workspace(tmp_path / "ws") as writer:
        run_id = (await writer.create_run(RunConfig())).run_id
    before = sorted(p.name for p in (tmp_path / "ws").iterdir())
    async with Workspace(tmp_path / "ws", readonly=True) as reader:
        assert (await reader.get_run(run_id)).run_id == run_id
        calls = [
            reader.create_run(RunConfig()),
            reader.update_run(run_id, status="running"),
            reader.add_candidate(
                CandidateRecord(run_id=run_id, candidate_id="c", content_hash="h", components={})
            ),
            reader.record_rollouts([rollout("s1")]),
            reader.save_frontier(run_id, {}, {}),
            reader.append_event(run_id, "x"),
            reader.write_file(run_id, "report.md", "x"),
        ]
        for call in calls:
            with pytest.raises(WorkspaceError, match="read-only"):
                await call
    assert (await _count_runs(tmp_path / "ws")) == 1
    assert not (tmp_path / "ws" / "runs").exists()
    assert {"workspace.sqlite"} <= set(before)


async def _count_runs(root: Path) -> int:
    async with Workspace(root) as ws:
        return len(await ws.list_runs())
