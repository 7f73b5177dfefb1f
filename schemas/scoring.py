"""A verifier's judgement: ``Score`` (the reward and its feedback) built from weighted ``Metric``s.

A verifier (or the spec API's ``score_fn``) returns either a plain score in [0, 1] or named
metrics::

    Score(score=0.8, feedback="close, but the unit is wrong")
    Score(metrics=(Metric("correct", 1.0, weight=0.7), Metric("brief", 0.0, weight=0.3)))

With metrics, the reward is their weighted sum (a metric of weight 0 is tracked, not scored)
and every metric is also reported as an objective of its own in the rollout answer, beside
``reward``. The reward must lie in [0, 1] like any score, so weights of metrics valued in
[0, 1] should sum to at most 1. Both models cross from user code into the container, so they
validate, and a mistake names the metric and the fix.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass

__all__ = ["Metric", "Score"]


@dataclass(frozen=True, config=ConfigDict(allow_inf_nan=False))
class Metric:
    """One named measurement of a rollout; ``weight`` is its share of the reward.

    Positional like the spec's ``Metric("correct", 1.0, weight=1.0)``.
    """

    name: str
    value: float
    weight: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


class Score(BaseModel):
    """``score`` in [0, 1] and actionable ``feedback``; or ``metrics`` whose weighted sum it is."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)  # type: ignore[assignment]
    feedback: str = ""
    metrics: tuple[Metric, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _reward_from_metrics(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("metrics"):
            if isinstance(data, dict) and data.get("score") is None:
                raise ValueError("a Score needs score= (a number in [0, 1]) or metrics=(Metric...)")
            return data
        metrics = [m if isinstance(m, Metric) else Metric(**m) for m in data["metrics"]]
        _check_metrics(metrics)
        reward = math.fsum(m.value * m.weight for m in metrics)
        given = data.get("score")
        if given is not None and not math.isclose(given, reward, abs_tol=1e-9):
            raise ValueError(
                f"score={given} differs from the weighted sum of the metrics ({reward:g}); "
                "give metrics (the reward is their weighted sum) or score, not both"
            )
        if not 0.0 <= reward <= 1.0 + 1e-12:
            shown = ", ".join(f"{m.name}={m.value:g} x {m.weight:g}" for m in metrics)
            raise ValueError(
                f"the weighted sum of the metrics ({shown}) is {reward:g}, outside [0, 1]; "
                "use weights that sum to at most 1 and metric values in [0, 1]"
            )
        return {**data, "metrics": tuple(metrics), "score": min(reward, 1.0)}

    @property
    def reward(self) -> float:
        """The reward this score gives the rollout (the spec's name for ``score``)."""
        return self.score

    def objectives(self) -> dict[str, float]:
        """``reward`` and every metric by name: the rollout answer's ``objectives``."""
        return {"reward": self.score, **{m.name: float(m.value) for m in self.metrics}}


def _check_metrics(metrics: list[Metric]) -> None:
    names = [m.name for m in metrics]
    if "reward" in names:
        raise ValueError("a metric may not be named 'reward' (that is the weighted sum); rename it")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"metric names must be unique; repeated: {', '.join(duplicates)}")
    if not any(m.weight for m in metrics):
        raise ValueError(
            "no metric has a weight, so the reward would always be 0; give the metric(s) that "
            "make the reward a weight, e.g. Metric('correct', 1.0, weight=1.0)"
        )
