"""``optimize dry-run``: everything about a run that can be checked before any budget is spent.

Checks, in order: a task source is given; for ``--module`` the target, dataset, splits and
verifier load (and the module is served in-process for the HTTP checks); every container
answers ``GET /health`` with ``gepa-container/1`` and a valid ``GET /program`` with train
and holdout seeds (the containers agreeing on it), and what it warns about
(``metadata.warnings``); the baseline runs on a few train seeds through the container, as a
rollout of the run would (:mod:`optimizer.checks.sample_rollouts`); MIPRO has Optuna and knows
where the demos go; the reflection model is configured and, when its base URL is local,
``GET {base_url}/models`` answers; the budget covers the floor a run needs. Each problem
carries its fix. The reflection model is never called, and nothing is stored: a dry-run
makes no run, so its rollouts count against no budget and fill no cache.
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from container import load_dataset, load_splits, load_target, load_verifier
from optimizer.checks.findings import Finding, render_findings
from optimizer.checks.sample_rollouts import SAMPLE_ROLLOUTS, findings_of, sample_rollouts
from optimizer.mipro import load_optuna, surface_for
from optimizer.runtime.accounts.budget import resolve_metric_calls
from optimizer.runtime.accounts.plan import auto_budget_warning, holdout_overlap, plan_run
from optimizer.runtime.lifecycle.embedded import EmbeddedContainer, module_spec
from proposer import Endpoint, ProposerConfig, resolve_endpoint
from proposer.external import check_proposer_command
from schemas import PROTOCOL, Health, Program, RolloutRecord, RunConfig, UserError

__all__ = ["SAMPLE_ROLLOUTS", "Finding", "preflight", "preflight_for_run", "render_findings"]

T = TypeVar("T")


class _Checker:
    def __init__(
        self, config: RunConfig, http: httpx.AsyncClient, run_id: str | None = None
    ) -> None:
        self.config = config
        self.http = http
        self.run_id = run_id  # the run the sample rollouts are sent for (create), if any
        self.findings: list[Finding] = []
        self.samples: list[RolloutRecord] = []  # the scored ones, for that run's cache

    def add(
        self, check: str, ok: bool, message: str, fix: str = "", *, warning: bool = False
    ) -> None:
        self.findings.append(Finding(check, ok, message, fix, warning))

    def load(
        self, check: str, fn: Callable[[], T], describe: Callable[[T], str], fix: str
    ) -> T | None:
        try:
            value = fn()
        except UserError as exc:
            self.add(check, False, str(exc), fix)
            return None
        self.add(check, True, describe(value))
        return value

    async def module(self) -> bool:
        """Load the --module parts one by one, so each failure is named."""
        cfg = self.config
        target = self.load(
            f"target {module_spec(cfg)}",
            lambda: load_target(module_spec(cfg)),
            lambda t: f"{t.id} ({len(t.baseline)} component(s))",
            "fix --module / --target",
        )
        if target is None:
            return False
        source = cfg.dataset or target.dataset
        if source is None:
            self.add(
                "dataset", False, f"target {target.id!r} has no dataset", "pass --dataset PATH"
            )
            return False
        data = self.load(
            "dataset",
            lambda: load_dataset(source),
            lambda d: f"{len(d)} examples from {source}",
            "fix --dataset",
        )
        if data is None:
            return False
        splits = self.load(
            "splits",
            lambda: load_splits(data, cfg.splits_file),
            lambda s: f"train {len(s.train)}, val {len(s.val)}, holdout {len(s.holdout)}",
            "fix --splits-file",
        )
        verifier = self.load(
            "verifier",
            lambda: load_verifier(cfg.verifier or target.verifier),
            lambda v: v.name,
            "fix --verifier (a JSON file, a built-in name or module:function)",
        )
        return splits is not None and verifier is not None

    async def container(self, url: str, token: str | None) -> Program | None:
        """The container at ``url`` is healthy, speaks our protocol, and serves its program."""
        if not await self._healthy(url):
            return None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self._program_of(url, headers)

    async def _healthy(self, url: str) -> bool:
        check = f"container {url}"
        try:
            health = await self.http.get(f"{url}/health", timeout=10.0)
            parsed = Health.model_validate(health.json()) if health.status_code == 200 else None
        except httpx.HTTPError as exc:
            self.add(
                check,
                False,
                f"unreachable ({type(exc).__name__}: {exc})",
                "start it with `gepa-runtime container MODULE --dataset PATH` or fix --container URL",
            )
            return False
        except (ValueError, ValidationError):
            parsed = None
        if parsed is None:
            self.add(
                check,
                False,
                f"GET /health answered {health.status_code} without a gepa-container/1 body",
                "point --container at a task container (not another service)",
            )
            return False
        if parsed.protocol != PROTOCOL:
            self.add(
                check,
                False,
                f"speaks {parsed.protocol!r}, this optimizer speaks {PROTOCOL!r}",
                "upgrade the container or gepa-runtime so both speak the same protocol",
            )
            return False
        self.add(check, True, f"healthy, {PROTOCOL}")
        return True

    async def _program_of(self, url: str, headers: dict[str, str]) -> Program | None:
        try:
            response = await self.http.get(f"{url}/program", headers=headers, timeout=30.0)
        except httpx.HTTPError as exc:
            self.add(
                f"program {url}",
                False,
                f"GET /program failed ({type(exc).__name__}: {exc})",
                "check the container's log",
            )
            return None
        if response.status_code in (401, 403):
            self.add(
                f"program {url}",
                False,
                f"GET /program refused the token ({response.status_code})",
                "pass the container's token with --token (or GEPA_CONTAINER_TOKEN)",
            )
            return None
        try:
            program = Program.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            self.add(
                f"program {url}",
                False,
                f"GET /program is not a valid program ({response.status_code}): {str(exc)[:300]}",
                "fix the container's /program route",
            )
            return None
        return program

    def program(self, program: Program) -> None:
        seeds = program.seeds
        self.add(
            "program",
            True,
            f"{program.program_id}: {len(program.components)} component(s), "
            f"{len(seeds.train)} train / {len(seeds.val)} val / {len(seeds.holdout)} holdout seeds",
        )
        if not seeds.train:
            self.add(
                "train seeds",
                False,
                "the program has no train seeds",
                "give the container a train split (--splits-file)",
            )
        if not seeds.holdout and self.config.lift_without_holdout:
            self.add(
                "holdout seeds",
                True,
                "none: the lift is measured on the seeds that choose the winner "
                "(lift_without_holdout), so it includes the luck of that choice",
                warning=True,
            )
        elif not seeds.holdout:
            self.add(
                "holdout seeds",
                False,
                "the program has no holdout seeds",
                "give the container a holdout split (--splits-file)",
            )
        overlap = holdout_overlap(seeds.train, seeds.val, seeds.holdout)  # as `run` refuses
        if overlap:
            self.add(
                "splits",
                False,
                f"{len(overlap)} holdout seed(s) are also train or val seeds (e.g. {overlap[0]})",
                "make the splits disjoint, or the reported lift is not a heldout result",
            )

    def warnings(self, program: Program) -> None:
        """What the container warns about (``metadata.warnings``, as the SDK serves them)."""
        warnings = program.metadata.get("warnings")
        for text in warnings if isinstance(warnings, list) else []:
            self.add("container warns", True, str(text), warning=True)

    async def rollouts(self, url: str, program: Program, token: str | None, count: int) -> None:
        """The baseline on a few train seeds: a mistake every rollout would repeat fails here."""
        outcomes = await sample_rollouts(
            url, program, self.config, http=self.http, token=token, count=count, run_id=self.run_id
        )
        self.samples = [o.record for o in outcomes if o.record is not None]
        self.findings += findings_of(outcomes)

    def method(self, program: Program | None) -> None:
        if self.config.method == "gepa":
            self.add("method", True, "gepa (reflective prompt evolution)")
            return
        try:
            load_optuna()
        except UserError as exc:
            self.add(
                "method",
                False,
                "mipro needs Optuna, which is not installed",
                str(exc).split(": ", 1)[-1],
            )
            return
        if program is None:
            return
        try:
            surface = surface_for(program)
        except UserError as exc:
            self.add("method", False, str(exc), "fix the container's metadata.template")
            return
        if surface.demos is not None:
            self.add(
                "method",
                True,
                f"mipro: instructions in {surface.instruction!r}, demos in {surface.demos!r}",
            )
        else:
            self.add(
                "method",
                True,
                f"mipro: the program has no demos component, so demos are written into "
                f"{surface.instruction!r} as text",
                "declare the target with @optimize(baseline=PromptTemplate(...)) for real "
                "few-shot messages",
                warning=True,
            )

    async def reflection(self) -> None:
        cfg = self.config
        if cfg.proposer_command:
            self.load(
                "proposer command",
                lambda: check_proposer_command(cfg),
                lambda _: f"{cfg.proposer_command} (not run; see docs/proposer-command.md)",
                "fix --proposer-command / --proposer-env as the message says",
            )
            return
        try:
            endpoint = resolve_endpoint(ProposerConfig.from_run_config(cfg))
        except UserError as exc:
            self.add(
                "reflection model",
                False,
                str(exc),
                "offline: `gepa-runtime models serve`, then --reflection-base-url http://127.0.0.1:8013/v1 --reflection-model reflection",
            )
            return
        where = endpoint.base_url or "https://api.openai.com/v1"
        if endpoint.local:
            await self._local_reflection(endpoint, where)
        else:
            self._hosted_reflection(endpoint, where)

    def _hosted_reflection(self, endpoint: Endpoint, where: str) -> None:
        """A hosted model is not called (that would cost): only its key variable is checked."""
        if not endpoint.api_key_env:  # LiteLLM in process reads its own credentials
            self.add("reflection model", True, f"{endpoint.model} through LiteLLM (not called)")
        elif not os.environ.get(endpoint.api_key_env):
            self.add(
                "reflection model",
                False,
                f"{endpoint.model} at {where}: ${endpoint.api_key_env} is not set",
                f"export {endpoint.api_key_env}=... (or --reflection-api-key-env NAME)",
            )
        else:
            self.add(
                "reflection model",
                True,
                f"{endpoint.model} at {where} (key from ${endpoint.api_key_env}; not called)",
            )

    async def _local_reflection(self, endpoint: Endpoint, where: str) -> None:
        """A local server is asked ``GET /models``: it answers, and serves the model named."""
        url = f"{where.rstrip('/')}/models"
        try:
            response = await self.http.get(url, timeout=10.0)
        except httpx.HTTPError as exc:
            self.add(
                "reflection model",
                False,
                f"GET {url} failed ({type(exc).__name__}: {exc})",
                "start the local model server (`gepa-runtime models serve`) or fix --reflection-base-url",
            )
            return
        if response.status_code != 200:
            self.add(
                "reflection model",
                False,
                f"GET {url} answered {response.status_code}",
                "point --reflection-base-url at an OpenAI-compatible server (ending in /v1)",
            )
            return
        ids = _model_ids(response)
        self.add("reflection model", True, f"{endpoint.model} at {where} answers GET /models")
        if ids and endpoint.model not in ids:
            self.add(
                "reflection model name",
                True,
                f"{endpoint.model!r} is not among the served models {sorted(ids)[:5]}",
                "check --reflection-model (servers with a single model often accept any name)",
                warning=True,
            )

    def budget(self, program: Program) -> None:
        cfg, seeds = self.config, program.seeds
        limit = resolve_metric_calls(
            cfg, train=len(seeds.train), holdout=len(seeds.holdout), val=len(seeds.val)
        )
        if limit is None:
            self.add(
                "budget",
                False,
                "no metric-call budget",
                "pass --max-metric-calls N or --auto light|medium|heavy",
            )
            return
        plan = plan_run(
            limit,
            train=seeds.train,
            holdout=seeds.holdout,
            val=seeds.val,
            top_k=cfg.holdout_top_k,
            rng=random.Random(cfg.seed),
        )
        how = f"--auto {cfg.auto}" if cfg.max_metric_calls is None else "--max-metric-calls"
        large = cfg.max_metric_calls is None and auto_budget_warning(
            limit, str(cfg.auto), train=len(seeds.train), holdout=len(seeds.holdout),
            val=len(seeds.val),
        )  # fmt: skip
        if large:
            self.add("budget size", True, large, warning=True)
        if plan.skipped:
            self.add(
                "budget",
                True,
                f"{limit} metric calls ({how}) is less than a full run needs; it will skip: "
                + "; ".join(plan.skipped),
                "raise --max-metric-calls (or use --auto light) for a full run",
                warning=True,
            )
        else:
            self.add(
                "budget",
                True,
                f"{limit} metric calls ({how}): baseline on {len(plan.train)} train + "
                f"{len(plan.holdout)} holdout seeds, the winner chosen on {plan.selection_split}, "
                "the rest for the search",
            )


def _model_ids(response: httpx.Response) -> set[str]:
    try:
        data: Any = response.json()
        return {str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)}
    except (ValueError, AttributeError):
        return set()


async def _with_http(
    http: httpx.AsyncClient | None, fn: Callable[[httpx.AsyncClient], Awaitable[T]]
) -> T:
    if http is not None:
        return await fn(http)
    async with httpx.AsyncClient() as client:
        return await fn(client)


async def preflight(
    config: RunConfig,
    *,
    http: httpx.AsyncClient | None = None,
    sample_rollouts: int = SAMPLE_ROLLOUTS,
) -> list[Finding]:
    """Every check before a run; problems are ``Finding(ok=False)`` with a fix.

    ``sample_rollouts`` baseline rollouts go to the container on train seeds (0: none); the
    reflection model is never called.
    """
    checker = await _with_http(http, lambda client: _run_checks(config, client, sample_rollouts))
    return checker.findings


async def preflight_for_run(
    config: RunConfig, run_id: str | None, *, sample_rollouts: int = SAMPLE_ROLLOUTS
) -> tuple[list[Finding], list[RolloutRecord]]:
    """``preflight`` for the run ``run_id`` about to be created (``optimize create``): the
    findings, and the sample rollouts that scored, sent as that run sends them, to store in
    its rollout cache (none when ``run_id`` is None: samples as a dry-run sends them)."""
    checker = await _with_http(
        None, lambda client: _run_checks(config, client, sample_rollouts, run_id)
    )
    return checker.findings, checker.samples


async def _run_checks(
    config: RunConfig, http: httpx.AsyncClient, samples: int, run_id: str | None = None
) -> _Checker:
    checker = _Checker(config, http, run_id)
    token = config.container_token.get_secret_value() if config.container_token else None
    program: Program | None = None
    if not config.containers and not config.module:
        checker.add(
            "task container",
            False,
            "none given",
            "pass --container URL (repeatable) or --module MODULE --dataset PATH",
        )
    elif config.module:
        if await checker.module():
            async with EmbeddedContainer(config, token=token) as url:
                program = await _check_containers(checker, [url], token, samples)
    else:
        urls = [url.rstrip("/") for url in config.containers]
        program = await _check_containers(checker, urls, token, samples)
    checker.method(program)
    await checker.reflection()
    if program is not None:
        checker.budget(program)
    if config.task_model:
        checker.add(
            "task model", True, f"{config.task_model} (sent to the container as policy.model)"
        )
    return checker


async def _check_containers(
    checker: _Checker, urls: list[str], token: str | None, samples: int
) -> Program | None:
    """Health and program of every URL, then the first program's seeds, warnings and samples."""
    found: list[tuple[str, Program]] = []
    for url in urls:
        program = await checker.container(url, token)
        if program is not None:
            found.append((url, program))
    distinct = {(p.program_id, p.fingerprint) for _, p in found}
    if len(distinct) > 1:
        checker.add(
            "containers",
            False,
            f"the containers serve different programs: {sorted(distinct)}",
            "point every --container at the same program and version",
        )
    if not found:
        return None
    url, program = found[0]
    checker.program(program)
    checker.warnings(program)
    if samples > 0 and program.seeds.train and len(distinct) == 1:
        await checker.rollouts(url, program, token, samples)
    return program
