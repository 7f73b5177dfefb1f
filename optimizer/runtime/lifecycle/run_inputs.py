"""A run's input files live in its workspace: ``optimize create`` copies them there.

The product docs promise that after ``create`` "the runner no longer needs the local files,
only the target module and the runtime secrets". So a new ``--module`` run gets copies of
its dataset (a file or a folder), its splits file and its verifier JSON file in
``<workspace>/runs/<run_id>/inputs/``, and its stored config names the copies as
``workspace:runs/<run_id>/inputs/<name>``: relative to the workspace, so a workspace moved
or mounted elsewhere still finds them. The module itself (and a ``module:function``
verifier) is code, which the runner imports from its own checkout.

    record = await create_with_inputs(ws, config)         # copies, then stores the run
    config = resolve_inputs(stored_config(record), ws.root)  # before serving the module
"""

from __future__ import annotations

import secrets
from pathlib import Path

from schemas import RunConfig, RunRecord, UserError
from workspace import Workspace
from workspace.runfolder import check_run_id

__all__ = ["WORKSPACE_REF", "create_with_inputs", "is_workspace_ref", "resolve_inputs"]

WORKSPACE_REF = "workspace:"
_FIELDS = ("dataset", "splits_file", "verifier")


def is_workspace_ref(value: str | None) -> bool:
    """Whether a stored path names a file inside the run's workspace."""
    return bool(value) and str(value).startswith(WORKSPACE_REF)


def _defaults_of_target(config: RunConfig) -> dict[str, str]:
    """The dataset and verifier files the target declares, for fields the flags left unset."""
    if config.dataset is not None and config.verifier is not None:
        return {}
    from container import load_target  # the SDK only for a --module run, not a --container one

    spec = f"{config.module}:{config.target}" if config.target else str(config.module)
    target = load_target(spec)
    found = {"dataset": target.dataset, "verifier": target.verifier}
    return {
        name: str(value)
        for name, value in found.items()
        if getattr(config, name) is None and isinstance(value, str | Path)
    }


def _files(source: Path, name: str) -> list[tuple[str, bytes]]:
    """(name in the run folder, content) of a file, or of every file under a folder."""
    if source.is_file():
        return [(f"inputs/{name}{source.suffix}", source.read_bytes())]
    return [
        (f"inputs/{name}/{path.relative_to(source).as_posix()}", path.read_bytes())
        for path in sorted(source.rglob("*"))
        if path.is_file() and not any(p.startswith(".") for p in path.relative_to(source).parts)
    ]


def _copies(
    config: RunConfig, run_id: str, target_defaults: bool
) -> tuple[dict[str, str], list[tuple[str, bytes]]]:
    """The config fields pointing at copies, and the files to write."""
    values = {name: getattr(config, name) for name in _FIELDS}
    if target_defaults:
        values |= _defaults_of_target(config)
    update: dict[str, str] = {}
    files: list[tuple[str, bytes]] = []
    for name, value in values.items():
        if value is None or is_workspace_ref(value) or not Path(value).exists():
            continue  # a built-in verifier, module:function, or nothing: not a file to copy
        copied = _files(Path(value), name)
        if not copied:
            raise UserError(f"--{name.replace('_', '-')} {value}: the folder holds no files")
        files += copied
        stem = copied[0][0] if Path(value).is_file() else f"inputs/{name}"
        update[name] = f"{WORKSPACE_REF}runs/{run_id}/{stem}"
    return update, files


async def create_with_inputs(
    workspace: Workspace,
    config: RunConfig,
    run_id: str | None = None,
    *,
    target_defaults: bool = True,
) -> RunRecord:
    """Store a new run whose input files are copied into its run folder.

    ``target_defaults`` also copies the dataset and verifier files the target declares (it
    imports the module to find them; ``create --no-check`` imports nothing). Nothing
    half-made stays behind: a copy that fails deletes the run again.
    """
    run_id = check_run_id(run_id) if run_id is not None else f"run-{secrets.token_hex(5)}"
    if not config.module:
        return await workspace.create_run(config, run_id)
    try:
        update, files = _copies(config, run_id, target_defaults)
    except OSError as exc:
        raise UserError(f"cannot read the run's input files: {exc}") from exc
    record = await workspace.create_run(config.model_copy(update=update), run_id)
    try:
        for name, content in files:
            await workspace.write_file(run_id, name, content)
    except BaseException:
        await workspace.delete_run(run_id)
        raise
    return record


def resolve_inputs(config: RunConfig, root: Path) -> RunConfig:
    """``config`` with its ``workspace:`` paths made absolute under the workspace ``root``."""
    base = (root / "runs").resolve()
    update = {}
    for name in _FIELDS:
        value = getattr(config, name)
        if not is_workspace_ref(value):
            continue
        path = (root / value.removeprefix(WORKSPACE_REF)).resolve()
        if not path.is_relative_to(base):
            raise UserError(f"config.{name}: {value!r} points outside the workspace's run folders")
        if not path.exists():
            raise UserError(
                f"config.{name}: the run's copy {path} is missing from workspace {root}; "
                "create the run again (`gepa-runtime optimize create`)"
            )
        update[name] = str(path)
    return config.model_copy(update=update) if update else config
