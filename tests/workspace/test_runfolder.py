"""The run folder: atomic writes that cannot escape it, and read-only refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemas import RunConfig, UserError, WorkspaceError
from tests.workspace.conftest import Store
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


async def test_read_only_workspace_refuses_every_write(store: Store, rollout) -> None:
    from schemas import CandidateRecord, RunConfig

    async with store.open() as writer:
        run_id = (await writer.create_run(RunConfig())).run_id
    before = sorted(p.name for p in store.files.iterdir()) if store.files.exists() else []
    async with store.open(readonly=True) as reader:
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
    async with store.open() as ws:
        assert len(await ws.list_runs()) == 1
        assert await ws.list_files(run_id) == []
    assert not (store.files / "runs").exists()
    if store.engine == "sqlite":
        assert {"workspace.sqlite"} <= set(before)


async def test_files_of_a_run_are_shared_through_the_store(store: Store, tmp_path: Path) -> None:
    """Another process (on PostgreSQL: another host, with its own local folder) reads the
    files a run wrote and checks them out to a real folder; deleting the run removes them."""
    async with store.open() as ws:
        run_id = (await ws.create_run(RunConfig())).run_id
        await ws.write_file(run_id, "inputs/dataset/train.jsonl", b'{"q": 1}\n')
        await ws.write_file(run_id, "evidence.json", "{}")
    elsewhere = tmp_path / "other-host"
    other = Workspace(store.target, run_files=elsewhere) if store.engine == "postgres" else None
    async with other or store.open() as ws:
        assert await ws.list_files(run_id) == ["evidence.json", "inputs/dataset/train.jsonl"]
        assert await ws.read_file(run_id, "evidence.json") == b"{}"
        folder = await ws.checkout_files(run_id)
        assert folder == ws.run_dir(run_id)
        assert (folder / "inputs" / "dataset" / "train.jsonl").read_bytes() == b'{"q": 1}\n'
        await ws.delete_run(run_id)
        assert not folder.exists()
        with pytest.raises(UserError, match="no file"):
            await ws.read_file(run_id, "evidence.json")
