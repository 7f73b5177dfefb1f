"""Run-config flags shared by ``optimize create | dry-run | run``, each with a ``GEPA_*`` env.

Precedence: flag > environment variable > RunConfig default. Each variable also answers to
the product docs' ``ROLLOUT_GEPA_*`` name, and ``--task-model``'s is ``GEPA_STUDENT_MODEL``
(``GEPA_TASK_MODEL`` is deprecated): see :mod:`schemas.env`. Only flags the user set (or
whose env var is set) reach the config, so a resumed run is not overridden by defaults.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optimizer.runtime.tracking import URI_ENVS
from schemas import RunConfig, UserError
from schemas.env import config_env, read_env

__all__ = [
    "CONTAINER_FIELDS",
    "FLAGS",
    "add_config_flags",
    "add_container_flags",
    "config_from_args",
    "config_overrides",
]


@dataclass(frozen=True)
class Flag:
    """One command-line flag bound to a RunConfig field."""

    flag: str
    field: str
    help: str
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    # Variables a flag given without a value reads, first set wins (empty: a value is needed).
    bare: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return config_env(self.field)


_BARE = "\0bare"  # argparse's value for a flag given without one (``Flag.bare``)


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _finite(text: str) -> float:
    """A float flag: NaN and infinities are refused (NaN passes every comparison silently)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _prices(text: str) -> dict[str, Any]:
    """``--prices``: a JSON file, or the JSON itself, of model -> prices per million tokens."""
    source = text.strip()
    try:
        if not source.startswith("{"):
            source = Path(source).expanduser().read_text(encoding="utf-8")
        data = json.loads(source)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read the prices file {text!r}: {exc}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"the prices are not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(
            'give a JSON object: {"MODEL": {"input": 0.15, "output": 0.6, "cached_input": 0.075}}'
        )
    return data


FLAGS: tuple[Flag, ...] = (
    Flag("--method", "method", "optimizer: gepa (default) or mipro", choices=("gepa", "mipro")),
    Flag("--module", "module", "serve this Python module's @optimize target in-process"),
    Flag("--target", "target", "target id inside --module (when it registers several)"),
    Flag("--dataset", "dataset", "dataset file or folder for --module"),
    Flag("--verifier", "verifier", "verifier JSON file or module:function for --module"),
    Flag("--splits-file", "splits_file", "splits JSON for --module"),
    Flag(
        "--task-model", "task_model", "student model passed to the container as the rollout policy"
    ),
    Flag(
        "--reflection-model",
        "reflection_model",
        "proposer model (e.g. gpt-4.1, openrouter/..., or a local alias)",
    ),
    Flag(
        "--reflection-base-url",
        "reflection_base_url",
        "OpenAI-compatible base URL of the proposer model",
    ),
    Flag(
        "--reflection-endpoint",
        "reflection_endpoint",
        "local (one server on this machine: 1 proposal in flight, an echoed text is asked for "
        "once more) or hosted (an API: 4 in flight, an unchanged text is the model's answer); "
        "default auto: local when the model is served on this machine (a base URL on "
        "127.0.0.1/localhost, an ollama/ model)",
        choices=("auto", "local", "hosted"),
    ),
    Flag(
        "--reflection-api-key-env",
        "reflection_api_key_env",
        "env var holding the proposer's API key",
    ),
    Flag(
        "--proposer-mode",
        "proposer_mode",
        "agent (tool calls), text, rule (one sentence per proposal, for small models), or auto",
        choices=("auto", "agent", "text", "rule"),
    ),
    Flag("--max-prompt-chars", "max_prompt_chars", "length cap per component for proposals", int),
    Flag(
        "--reflection-max-tokens",
        "reflection_max_tokens",
        "output tokens per proposer call (default 2048)",
        int,
    ),
    Flag("--max-metric-calls", "max_metric_calls", "budget: paid rollouts", int),
    Flag(
        "--auto",
        "auto",
        "budget from split sizes (formula in docs/budget.md)",
        choices=("light", "medium", "heavy"),
    ),
    Flag("--max-cost-usd", "max_cost_usd", "budget: student + proposer dollars", _finite),
    Flag(
        "--prices",
        "prices",
        "model prices over the built-in table, USD per million tokens, for the student's and "
        'the reflection model\'s dollars: a JSON file or JSON, {"MODEL": {"input": 0.15, '
        '"output": 0.6, "cached_input": 0.075}} (a local model is priced only here)',
        _prices,
    ),
    Flag(
        "--select",
        "select",
        "what the winner is chosen by: best (default: the highest reward), "
        "cheapest-within:DELTA (the cheapest within DELTA of the best reward) or "
        "best-under:cost=USD|latency=MS|tokens=N (the best under a bound; docs/objectives.md)",
    ),
    Flag("--concurrency", "concurrency", "rollouts in flight (default 4)", int),
    Flag("--minibatch-size", "minibatch_size", "seeds per minibatch gate (default 4)", int),
    Flag(
        "--proposals-in-flight",
        "proposals_in_flight",
        "proposals written at once (default: 4 for a hosted reflection endpoint, 1 for a local "
        "one such as a single llama.cpp server; see --reflection-endpoint)",
        int,
    ),
    Flag("--use-merge", "use_merge", "try merges of complementary candidates (true/false)", _bool),
    Flag(
        "--holdout-top-k",
        "holdout_top_k",
        "frontier candidates scored on the val seeds to choose the winner (default 3)",
        int,
    ),
    Flag(
        "--min-holdout-improvement",
        "min_holdout_improvement",
        "lift needed to promote (default 0)",
        _finite,
    ),
    Flag("--seed", "seed", "random seed (default 0)", int),
    Flag(
        "--max-retries", "max_retries", "retries per rollout on 429/5xx/timeouts (default 5)", int
    ),
    Flag(
        "--rollout-timeout",
        "rollout_timeout_s",
        "seconds per rollout request (default 300)",
        _finite,
    ),
    Flag(
        "--max-response-mib",
        "max_response_mib",
        "refuse a rollout answer bigger than this, as an errored rollout (default 8)",
        float,
    ),
    Flag(
        "--max-error-rate",
        "max_error_rate",
        "stop when this share of rollouts fails (default 0.25)",
        _finite,
    ),
    Flag(
        "--retry-base-delay",
        "retry_base_delay_s",
        "first retry delay in seconds, doubling (default 0.5)",
        _finite,
    ),
    Flag(
        "--rate-limit-wait",
        "rate_limit_wait_s",
        "seconds to keep waiting while a container answers only 429 (rate limited) before "
        "its rollouts fail; 429s spend no --max-retries (default 600)",
        _finite,
    ),
    Flag(
        "--candidate-selection",
        "candidate_selection",
        "gepa: how the next parent is chosen: pareto (default: a frontier member, weighted by "
        "the train seeds it wins), current_best, epsilon_greedy, top_k_pareto",
        choices=("pareto", "current_best", "epsilon_greedy", "top_k_pareto"),
    ),
    Flag(
        "--candidate-selection-epsilon",
        "candidate_selection_epsilon",
        "gepa: epsilon_greedy's chance of a uniformly drawn parent (default 0.1)",
        _finite,
    ),
    Flag(
        "--candidate-selection-top-k",
        "candidate_selection_top_k",
        "gepa: top_k_pareto's k, the best train means it draws among (default 5)",
        int,
    ),
    Flag(
        "--component-selection",
        "component_selection",
        "gepa: components a proposal may edit: round_robin (default: one per proposal, in "
        "turn) or all",
        choices=("round_robin", "all"),
    ),
    Flag(
        "--batch-sampling",
        "batch_sampling",
        "gepa: a proposal's minibatch: failures_first (default: half the parent's failures, "
        "half seeds it passes) or epoch_shuffled (the next slice of shuffled train seeds)",
        choices=("failures_first", "epoch_shuffled"),
    ),
    Flag(
        "--acceptance",
        "acceptance",
        "gepa: a child passes its gate when it beats its parent (strict_improvement, default) "
        "or at least ties it (improvement_or_equal)",
        choices=("strict_improvement", "improvement_or_equal"),
    ),
    Flag(
        "--max-idle-iterations",
        "max_idle_iterations",
        "stop after this many iterations without a new candidate (default 20)",
        int,
    ),
    Flag(
        "--patience",
        "patience",
        "gepa: stop after this many proposals in a row without a better train mean "
        "(default 12; 0 never stops early)",
        int,
    ),
    Flag(
        "--stop-after-no-improvement",
        "stop_after_no_improvement",
        "gepa: stop after this many new candidates in a row without a better train mean",
        int,
    ),
    Flag(
        "--score-threshold",
        "score_threshold",
        "gepa: stop once the best train mean reaches this score",
        _finite,
    ),
    Flag(
        "--timeout",
        "search_timeout_s",
        "gepa: stop searching after this many seconds, then promote the best as usual",
        _finite,
    ),
    Flag(
        "--stop-file",
        "stop_file",
        "gepa: stop searching once this file exists (touch it), then promote the best",
    ),
    Flag(
        "--stop-signal",
        "stop_signal",
        "gepa: stop searching when the process gets this signal, then promote the best",
        choices=("SIGUSR1", "SIGUSR2"),
    ),
    Flag(
        "--num-instructions",
        "num_instructions",
        "mipro: instruction candidates, the baseline's included (default 6)",
        int,
    ),
    Flag(
        "--num-demo-sets",
        "num_demo_sets",
        "mipro: few-shot demo sets, the empty one included (default 6)",
        int,
    ),
    Flag("--max-demos", "max_demos", "mipro: demos per demo set (default 4)", int),
    Flag(
        "--full-eval-every",
        "full_eval_every",
        "mipro: re-score the best on full train every N trials (default 5)",
        int,
    ),
    Flag(
        "--proposer-command",
        "proposer_command",
        "an external coding agent as the proposer: a shell command run in one folder per "
        "proposal (Codex, Claude Code, aider; see docs/proposer-command.md)",
    ),
    Flag(
        "--proposer-timeout",
        "proposer_timeout_s",
        "seconds per proposer command run before its process group is killed (default 900)",
        _finite,
    ),
    Flag(
        "--mlflow",
        "mlflow_tracking_uri",
        "log the run to this MLflow tracking server; without a URI, to MLFLOW_TRACKING_URI's "
        "(needs pip install 'gepa-runtime[mlflow]')",
        bare=URI_ENVS,
    ),
    Flag(
        "--mlflow-prompt",
        "mlflow_prompt",
        "register the best's text as a new version of this prompt in MLflow's prompt "
        "registry at the end of the run (needs --mlflow or MLFLOW_TRACKING_URI)",
    ),
    Flag(
        "--mlflow-prompt-alias",
        "mlflow_prompt_alias",
        "the alias moved to that version when the run promotes it (default candidate)",
    ),
)


# Where a task container is and how hard to try it: what a command that only sends rollouts
# (``check``) takes of the run-config flags.
CONTAINER_FIELDS = (
    "module",
    "target",
    "dataset",
    "verifier",
    "splits_file",
    "task_model",
    "concurrency",
    "max_retries",
    "rollout_timeout_s",
    "max_response_mib",
    "retry_base_delay_s",
    "rate_limit_wait_s",
)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Every run-config flag, defaulting to None so unset flags stay unset."""
    add_container_flags(parser, tuple(f.field for f in FLAGS))
    _add_proposer_env(parser)


def add_container_flags(
    parser: argparse.ArgumentParser, fields: tuple[str, ...] = CONTAINER_FIELDS
) -> None:
    """``--container``, ``--token`` and the flags of ``fields`` (in ``FLAGS``' order)."""
    parser.add_argument(
        "--container",
        action="append",
        default=None,
        metavar="URL",
        help="task container URL, repeatable (env GEPA_CONTAINERS, comma-separated)",
    )
    parser.add_argument(
        "--token", default=None, help="container bearer token (env GEPA_CONTAINER_TOKEN)"
    )
    for f in FLAGS:
        if f.field not in fields:
            continue
        bare: dict[str, Any] = {"nargs": "?", "const": _BARE} if f.bare else {}
        parser.add_argument(
            f.flag,
            dest=f.field,
            type=f.type,
            choices=f.choices,
            default=None,
            help=f"{f.help} (env {f.env})",
            **bare,
        )


def _add_proposer_env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--proposer-env",
        dest="proposer_env",
        action="append",
        default=None,
        metavar="NAME",
        help="environment variable the proposer command may see, repeatable; no other "
        "secret reaches it (env GEPA_PROPOSER_ENV, comma-separated)",
    )


def _bare_value(f: Flag) -> Any:
    """The value of a flag given without one: the first of its variables that is set."""
    text = next((os.environ[e] for e in f.bare if os.environ.get(e)), None)
    if text is None:
        raise UserError(
            f"{f.flag} without a URI reads {', then '.join(f.bare)}, and none is set: pass "
            f"{f.flag} URI or set {f.bare[-1]}"
        )
    return f.type(text)


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Config fields the user set by flag or environment."""
    data: dict[str, Any] = {}
    containers = args.container or [
        u for u in (read_env("GEPA_CONTAINERS") or "").split(",") if u.strip()
    ]
    if containers:
        data["containers"] = [u.strip() for u in containers]
    token = args.token or read_env("GEPA_CONTAINER_TOKEN")
    if token:
        data["container_token"] = token
    for f in FLAGS:
        value = getattr(args, f.field, None)
        if value == _BARE:
            value = _bare_value(f)
        text = read_env(f.env) if value is None else None
        if text:
            try:
                value = f.type(text)
            except (ValueError, argparse.ArgumentTypeError) as exc:
                raise UserError(f"{f.env}={text!r} is not valid for {f.flag}: {exc}") from exc
        if value is not None:
            data[f.field] = value
    names = getattr(args, "proposer_env", None) or [
        n for n in (read_env("GEPA_PROPOSER_ENV") or "").split(",") if n.strip()
    ]
    if names:
        data["proposer_env"] = [n.strip() for n in names]
    return data


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> RunConfig:
    """A validated RunConfig; pydantic errors become a UserError naming the flag."""
    data = {**(base or {}), **config_overrides(args)}
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        by_field = {f.field: f.flag for f in FLAGS} | {
            "containers": "--container",
            "container_token": "--token",
            "proposer_env": "--proposer-env",
        }
        problems = []
        for err in exc.errors():
            loc = str(err["loc"][0]) if err["loc"] else ""
            problems.append(f"{by_field.get(loc, loc or 'config')}: {err['msg']}")
        raise UserError("invalid run configuration: " + "; ".join(problems)) from exc
