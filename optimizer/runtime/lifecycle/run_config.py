"""A run's config from the command line to a resume: every reshaping of a ``RunConfig``.

- **new**: ``new_config`` gives a run without a budget ``--auto light`` and pins its
  module, dataset, splits and verifier paths (``absolute_paths``): a stored run may be
  executed from another folder (``gepa-runtime serve``, a resume).
- **stored**: the workspace stores ``config.redacted()``, every secret as ``"***"``; a
  ``--module`` run's input files are copied first (:mod:`optimizer.runtime.lifecycle.run_inputs`).
- **read back**: ``stored_config`` is the stored config without what storing masked.
- **resumed**: ``resumed_config`` is the stored config with the secrets (the container token)
  and container URLs given now; the ``"***"`` of storing is dropped in one place
  (``_unmasked``); ``know_secrets`` tells the workspace's scrubber the secrets in play.
- **served**: ``serving_config`` points a ``--module`` config at its in-process container.
- **executed**: ``executed_config`` fills ``proposals_in_flight`` from where the reflection
  model runs.
- **described**: ``metric_call_limit``, ``plan_event`` and ``budget_warning``: the budget and
  the plan as the run's ``program`` event and its warnings say them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optimizer.runtime.accounts.budget import resolve_metric_calls
from optimizer.runtime.accounts.plan import (
    RunPlan,
    auto_budget_warning,
    default_proposals_in_flight,
)
from proposer.client import reflection_api_key, run_reflection_is_local
from proposer.external import command_secrets
from schemas import Program, RunConfig, RunRecord, Seeds, UserError
from workspace import Workspace
from workspace.redact import MASK

__all__ = [
    "DEFAULT_AUTO",
    "MODULE_FIELDS",
    "absolute_paths",
    "budget_warning",
    "executed_config",
    "know_secrets",
    "metric_call_limit",
    "new_config",
    "plan_event",
    "resumed_config",
    "serving_config",
    "stored_config",
]

DEFAULT_AUTO = "light"  # the budget of a run given none
MODULE_FIELDS = ("module", "target", "dataset", "verifier", "splits_file")


def new_config(config: RunConfig) -> RunConfig:
    """A new run's config: ``--auto light`` when no budget is given, its paths pinned."""
    if not config.budget_given():
        config = config.model_copy(update={"auto": DEFAULT_AUTO})
    return absolute_paths(config)


def _absolute(value: str | None) -> str | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else value


def absolute_paths(config: RunConfig) -> RunConfig:
    """The config with existing module/dataset/splits/verifier paths made absolute.

    A stored run may be executed from another folder (``gepa-runtime serve``, a resume),
    so relative paths are pinned when the run is created. Dotted module names and
    ``module:function`` verifiers are left as they are.
    """
    if not config.module:
        return config
    update = {
        name: _absolute(getattr(config, name)) for name in ("module", "dataset", "splits_file")
    }
    update["verifier"] = _absolute(config.verifier)
    return config.model_copy(update=update)


def _unmasked(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The stored config's fields but the secrets, which storing replaced by ``"***"``."""
    return {k: v for k, v in stored.items() if v != MASK}


def stored_config(record: RunRecord) -> RunConfig:
    """The run's stored config as a ``RunConfig``; secrets (stored as ``***``) are left out."""
    return RunConfig.model_validate(_unmasked(record.config))


def resumed_config(ws: Workspace, record: RunRecord, given: RunConfig | None) -> RunConfig:
    """The stored config of a run to resume, with the given secrets and container URLs."""
    if record.status == "completed":
        raise UserError(f"run {record.run_id} already completed; see {ws.run_dir(record.run_id)}")
    if given is not None and ws.scrubber.value(given.redacted()) == record.config:
        return given  # the run's own config (just created from it), with what storing removed
    cfg = _merge_secrets(record.run_id, record.config, given)
    if given is not None and given.containers:
        cfg = cfg.model_copy(update={"containers": given.containers})
    return cfg


def _merge_secrets(run_id: str, stored: dict[str, Any], given: RunConfig | None) -> RunConfig:
    data = _unmasked(stored)
    if given is not None and given.container_token is not None:
        data["container_token"] = given.container_token.get_secret_value()
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise UserError(
            f"the stored config of run {run_id} is not valid any more ({problems}); "
            "create a new run"
        ) from exc


def know_secrets(ws: Workspace, cfg: RunConfig) -> None:
    """Mask the run's container token and reflection key wherever they appear in what it stores."""
    token = cfg.container_token.get_secret_value() if cfg.container_token else None
    key = reflection_api_key(
        cfg.reflection_model, cfg.reflection_base_url, cfg.reflection_api_key_env
    )
    ws.scrubber.add(token, key, *command_secrets(cfg))


def serving_config(config: RunConfig, url: str) -> RunConfig:
    """``config`` pointed at ``url`` with the module fields cleared (``RunConfig`` forbids both)."""
    return config.model_copy(update={"containers": [url], **dict.fromkeys(MODULE_FIELDS)})


def executed_config(config: RunConfig) -> RunConfig:
    """The config a run executes: ``proposals_in_flight`` defaulted when the user left it out
    (:func:`optimizer.runtime.accounts.plan.default_proposals_in_flight`)."""
    if config.proposals_in_flight is not None:
        return config
    local = run_reflection_is_local(config)
    return config.model_copy(update={"proposals_in_flight": default_proposals_in_flight(local)})


def metric_call_limit(config: RunConfig, seeds: Seeds) -> int:
    """The run's metric-call budget: explicit or from ``--auto``; ``UserError`` when neither."""
    limit = resolve_metric_calls(
        config, train=len(seeds.train), holdout=len(seeds.holdout), val=len(seeds.val)
    )
    if limit is None:
        raise UserError("no budget: pass --max-metric-calls N or --auto light|medium|heavy")
    return limit


def _auto(config: RunConfig) -> str | None:
    """The ``--auto`` level that set the budget (an explicit ``--max-metric-calls`` wins)."""
    return config.auto if config.max_metric_calls is None else None


def plan_event(config: RunConfig, program: Program, plan: RunPlan, limit: int) -> dict[str, Any]:
    """The ``program`` event: the program, its splits, the budget and what the plan uses."""
    seeds = program.seeds
    return {
        "program_id": program.program_id,
        "fingerprint": program.fingerprint,
        "components": [c.name for c in program.components],
        "seeds": {
            "train": len(seeds.train),
            "val": len(seeds.val),
            "holdout": len(seeds.holdout),
        },
        "budget": {
            "max_metric_calls": limit,
            "max_cost_usd": config.max_cost_usd,
            "auto": _auto(config),
        },
        "plan": {
            "train": len(plan.train),
            "holdout": len(plan.holdout),
            "val": len(plan.val),
            "selection": plan.selection_split,
            "search": plan.search,
            "skipped": list(plan.skipped),
        },
        "proposals_in_flight": config.proposals_in_flight,
        # The seeds of each split the run scores, so a view of the run (``runs compare``)
        # can tell a seed's split from its events alone.
        "splits": {"train": list(plan.train), "val": list(plan.val), "holdout": list(plan.holdout)},
    }


def budget_warning(config: RunConfig, seeds: Seeds, limit: int) -> str | None:
    """What a large ``--auto`` budget will cost and how to cap it, or ``None``."""
    auto = _auto(config)
    if not auto:
        return None
    return auto_budget_warning(
        limit, auto, train=len(seeds.train), holdout=len(seeds.holdout), val=len(seeds.val)
    )
