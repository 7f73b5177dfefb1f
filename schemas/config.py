"""The one config object of a run: what to optimize, with which models, under which budget.

It crosses files and the REST API, so it is a pydantic model. Unknown keys are rejected
(a typo in a config is a mistake to report, not a field to ignore). Secrets are
``SecretStr`` and ``redacted()`` is what gets stored: tokens and keys never reach the
database; a resumed run takes them again from flags or the environment.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from schemas.select import SelectRule, parse_select

__all__ = ["AUTO_LEVELS", "BranchOf", "ModelPrice", "RunConfig"]

AUTO_LEVELS = ("light", "medium", "heavy")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class BranchOf(BaseModel):
    """Where a branched run starts: a candidate of another run of the same workspace, whose
    components are the branch's baseline (``gepa-runtime runs branch``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1)
    candidate_id: str = Field(min_length=1)


class ModelPrice(BaseModel):
    """The user's price of one model, USD per million tokens (``RunConfig.prices``);
    ``cached_input`` unset bills cached prompt tokens at the ``input`` price."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


class RunConfig(BaseModel):
    """Everything a run needs. Every field has a ``GEPA_<FIELD>`` environment variable in the CLI."""

    # NaN passes every comparison (a NaN min_holdout_improvement promotes nothing and lands
    # in evidence.json as bare NaN); infinities are no budget or timeout either.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    method: Literal["gepa", "mipro"] = "gepa"
    # Where the task container is: one or many URLs, or a module served in-process.
    containers: list[str] = Field(default_factory=list)
    container_token: SecretStr | None = None
    module: str | None = None
    target: str | None = None
    dataset: str | None = None
    verifier: str | None = None
    splits_file: str | None = None
    # Models. The task model is passed to the container as the rollout policy.
    task_model: str | None = None
    reflection_model: str | None = None
    reflection_base_url: str | None = None
    reflection_api_key_env: str = "OPENAI_API_KEY"
    # What serves the reflection model: "local" (one server on this machine answering one
    # request at a time, often a small model), "hosted" (an API answering many at once); "auto"
    # tells them apart by where the model is routed (proposer.client.run_reflection_is_local).
    reflection_endpoint: Literal["auto", "local", "hosted"] = "auto"
    proposer_mode: Literal["auto", "agent", "text", "rule"] = "auto"
    max_prompt_chars: int = Field(default=6000, ge=100)
    reflection_max_tokens: int = Field(default=2048, ge=64)
    # Budget.
    max_metric_calls: int | None = Field(default=None, ge=1)
    auto: Literal["light", "medium", "heavy"] | None = None
    max_cost_usd: float | None = Field(default=None, gt=0)
    # Prices on top of the built-in table (transport.pricing), by model name: the student's
    # and the reflection model's dollars, and --max-cost-usd, use them.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # What the winner is chosen by (schemas.select): best, cheapest-within:DELTA or
    # best-under:cost=USD|latency=MS|tokens=N.
    select: str = "best"
    # Search.
    concurrency: int = Field(default=4, ge=1, le=512)
    minibatch_size: int = Field(default=4, ge=1)
    # None: follows reflection_endpoint
    # (optimizer.runtime.accounts.plan.default_proposals_in_flight).
    proposals_in_flight: int | None = Field(default=None, ge=1, le=32)
    use_merge: bool = True
    max_merges: int = Field(default=5, ge=0)
    holdout_top_k: int = Field(default=3, ge=1)
    min_holdout_improvement: float = 0.0
    # A program without holdout seeds is refused (the lift must be measured on seeds that took
    # no part in choosing the winner), unless this is set: the spec API's runs (train and val
    # seeds only) then measure the lift on the seeds that chose the winner, and say so.
    lift_without_holdout: bool = False
    seed: int = 0
    # Reliability.
    max_retries: int = Field(default=5, ge=0)
    rollout_timeout_s: float = Field(default=300.0, gt=0)
    # A bigger rollout answer is refused as an errored rollout, read no further than this.
    max_response_mib: float = Field(default=8.0, gt=0, le=1024)
    max_error_rate: float = Field(default=0.25, ge=0, le=1)
    retry_base_delay_s: float = Field(default=0.5, ge=0)
    # A container answering nothing but 429s is waited on this long before rollouts fail:
    # rate limits clear by themselves (a provider's minute window), and 429s spend no retries.
    rate_limit_wait_s: float = Field(default=600.0, gt=0)
    # GEPA's parts by name (optimizer.gepa.strategies; the Python API also takes objects).
    candidate_selection: Literal["pareto", "current_best", "epsilon_greedy", "top_k_pareto"] = (
        "pareto"
    )
    candidate_selection_epsilon: float = Field(default=0.1, ge=0, le=1)  # epsilon_greedy's
    candidate_selection_top_k: int = Field(default=5, ge=1)  # top_k_pareto's
    component_selection: Literal["round_robin", "all"] = "round_robin"
    batch_sampling: Literal["failures_first", "epoch_shuffled"] = "failures_first"
    acceptance: Literal["strict_improvement", "improvement_or_equal"] = "strict_improvement"
    # GEPA's stop conditions, besides the budget. It stops after this many iterations in a
    # row made no candidate, after ``patience`` proposals in a row found no better train mean
    # (0: never), after ``stop_after_no_improvement`` new candidates did not raise it, once
    # the best train mean reaches ``score_threshold``, after ``search_timeout_s`` seconds of
    # search, when ``stop_file`` exists, or on ``stop_signal``; then promotion runs as usual.
    max_idle_iterations: int = Field(default=20, ge=1)
    patience: int = Field(default=12, ge=0)
    stop_after_no_improvement: int | None = Field(default=None, ge=1)
    score_threshold: float | None = None
    search_timeout_s: float | None = Field(default=None, gt=0)
    stop_file: str | None = Field(default=None, min_length=1)
    stop_signal: Literal["SIGUSR1", "SIGUSR2"] | None = None
    # MIPRO (--method mipro): the search space and how often the best is re-scored.
    num_instructions: int = Field(default=6, ge=1, le=50)
    num_demo_sets: int = Field(default=6, ge=1, le=50)
    max_demos: int = Field(default=4, ge=0, le=32)
    full_eval_every: int = Field(default=5, ge=1)
    # An external coding agent as the proposer (proposer/external.py, docs/proposer-command.md):
    # a shell command run in a folder per proposal, seeing only the variables named here.
    proposer_command: str | None = Field(default=None, min_length=1)
    proposer_env: list[str] = Field(default_factory=list)
    proposer_timeout_s: float = Field(default=900.0, gt=0)
    # Experiment tracking (optimizer.runtime.tracking): an MLflow tracking server's URI; unset,
    # GEPA_MLFLOW_TRACKING_URI or MLFLOW_TRACKING_URI of the running process is used if set.
    mlflow_tracking_uri: str | None = Field(default=None, min_length=1)
    # The winner as a new version of this prompt in MLflow's prompt registry, at the run's end;
    # the alias moves to it only when the run promoted it.
    mlflow_prompt: str | None = Field(default=None, min_length=1)
    mlflow_prompt_alias: str = Field(default="candidate", min_length=1)
    # A branch: the baseline is this candidate of that run instead of the program's own text
    # (optimizer.runtime.lifecycle.branch); set by `runs branch` and POST .../branch.
    branch_of: BranchOf | None = None

    @field_validator("proposer_env")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not _ENV_NAME.match(n)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not an environment variable name: give names (NAME), not values"
            )
        return names

    @field_validator("select")
    @classmethod
    def _select_rule(cls, spec: str) -> str:
        return str(parse_select(spec))  # ValueError names the fix

    def select_rule(self) -> SelectRule:
        """``select`` parsed."""
        return parse_select(self.select)

    @model_validator(mode="after")
    def _one_source(self) -> RunConfig:
        if self.containers and self.module:
            raise ValueError(
                "give either containers (--container URL) or module (--module), not both"
            )
        if self.module is None and (self.dataset or self.target):
            raise ValueError("dataset/target need module (--module MODULE)")
        return self

    def redacted(self) -> dict[str, Any]:
        """The config as JSON with every secret replaced by ``"***"``: what gets stored."""
        data = self.model_dump(mode="json")
        for key in ("container_token",):
            if data.get(key) is not None:
                data[key] = "***"
        return data

    def budget_given(self) -> bool:
        """Whether the user set a metric-call budget (explicitly or via ``auto``)."""
        return self.max_metric_calls is not None or self.auto is not None
