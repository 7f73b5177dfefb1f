"""The program a run is scored on: its splits checked, checked again when the run resumes,
watched while it runs.

Scores are comparable only within one version of one program. A resumed run must meet the
program it started on (same id, same component names): anything else is refused, before a
rollout is paid, because its candidates would be mixed with the other program's. A new
fingerprint of the same program (code, data, splits, verifier or model changed) is allowed
and reported: the cache is keyed by fingerprint, so its rollouts are paid again. While the
run executes, :class:`ProgramWatch` asks the container for its program again; a container
that now serves another version stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import httpx

from optimizer.runtime.accounts.plan import holdout_overlap
from optimizer.runtime.rollouts.client import ContainerClient
from schemas import ContainerError, GepaError, Program, RunConfig, RunRecord, UserError

__all__ = ["ProgramWatch", "check_resumed", "check_splits"]


def check_splits(program: Program, config: RunConfig | None = None) -> None:
    """``UserError`` unless the program has train and holdout seeds and no holdout seed is
    also a train or val seed (the lift is measured on seeds that took no part in the search;
    a container written without the SDK can break that). With ``config.lift_without_holdout``
    (the spec API's runs) no holdout seed is needed: the lift is then measured on the seeds
    that chose the winner (:mod:`optimizer.runtime.results.promotion`)."""
    seeds = program.seeds
    needed = (
        ("train",) if config is not None and config.lift_without_holdout else ("train", "holdout")
    )
    for split in needed:
        if not getattr(seeds, split):
            raise UserError(
                f"program {program.program_id!r} has no {split} seeds: "
                f"give the container a {split} split"
            )
    leaks = holdout_overlap(seeds.train, seeds.val, seeds.holdout)
    if leaks:
        more = f" and {len(leaks) - 10} more" if len(leaks) > 10 else ""
        raise UserError(
            f"program {program.program_id!r} has {len(leaks)} holdout seed(s) that are also "
            f"train or val seeds: {', '.join(leaks[:10])}{more}. The lift is measured on "
            "holdout seeds that took no part in the search; make the container's splits "
            "disjoint (--splits-file)"
        )


def check_resumed(
    record: RunRecord, program: Program, stored: Sequence[str] | None, where: Sequence[str]
) -> str | None:
    """``UserError`` for another program; the warning for a new fingerprint; else ``None``.

    ``stored`` are the component names the run started with (``None``: not known), ``where``
    the container URLs that serve ``program``.
    """
    if record.program_id is None:  # the run never reached a container before
        return None
    served = sorted(c.name for c in program.components)
    names = sorted(stored) if stored is not None else None
    if record.program_id != program.program_id or (names is not None and names != served):
        raise UserError(
            f"run {record.run_id} was started on program {record.program_id!r} "
            f"(components {', '.join(names or ['?'])}), but {', '.join(where)} serves "
            f"{program.program_id!r} (components {', '.join(served)}); resume it with "
            "--container pointing at the program it started on, or start a new run for this "
            "program (its candidates and rollouts are kept)"
        )
    if record.fingerprint and record.fingerprint != program.fingerprint:
        return (
            f"program {program.program_id!r} changed since run {record.run_id} last ran "
            f"(fingerprint {record.fingerprint[:12]} -> {program.fingerprint[:12]}: its code, "
            "data, splits, verifier or model changed); rollouts scored by the old version are "
            "not reused: they are paid again and count against the budget"
        )
    return None


class ProgramWatch:
    """Asks the container for its program again; a new version is a ``ContainerError``."""

    def __init__(
        self,
        client: ContainerClient,
        program: Program,
        run_id: str,
        warn: Callable[[str], Awaitable[None]],
    ) -> None:
        self._client = client
        self._program = program
        self._run_id = run_id
        self._warn = warn

    async def check(self) -> None:
        """Raise ``ContainerError`` (after a warning event) if the program changed."""
        try:
            now = await self._client.program()
        except (httpx.HTTPError, ContainerError):
            return  # unreachable right now: the rollouts' retries deal with an outage
        before = self._program
        if (now.program_id, now.fingerprint) == (before.program_id, before.fingerprint):
            return
        message = (
            f"the container changed during run {self._run_id}: it served "
            f"{before.program_id!r} (fingerprint {before.fingerprint[:12]}) and now serves "
            f"{now.program_id!r} ({now.fingerprint[:12]}); scores of two versions cannot be "
            f"compared, so the run stops. Resume it with `gepa-runtime optimize run "
            f"{self._run_id}` to score it on the new version (its rollouts are paid again), "
            "or bring the old version back"
        )
        await self._warn(message)
        raise ContainerError(message)

    async def every(self, seconds: float, stop: Callable[[GepaError], None]) -> None:
        """``check`` every ``seconds`` until a change, which is handed to ``stop``."""
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.check()
            except GepaError as exc:
                stop(exc)
                return
