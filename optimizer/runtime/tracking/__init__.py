"""Experiment tracking: a run's events mirrored into MLflow (``--mlflow``).

- :mod:`optimizer.runtime.tracking.tracker`: ``mlflow_tracking``, the listener of one run
  (on or off, the MLflow run kept across a resume, the bounded wait at the end);
- :mod:`optimizer.runtime.tracking.ops`: what is logged, as plain operations (pure);
- :mod:`optimizer.runtime.tracking.worker`: the thread that makes the blocking MLflow calls;
- :mod:`optimizer.runtime.tracking.prompts`: the winner as a version in MLflow's prompt registry.
"""

from __future__ import annotations

from optimizer.runtime.tracking.prompts import (
    DEFAULT_ALIAS,
    PromptExport,
    gepa_version,
    prompt_export,
    register_prompt,
)
from optimizer.runtime.tracking.tracker import (
    FINISH_TIMEOUT_S,
    STATE_FILE,
    URI_ENVS,
    mlflow_tracking,
    require_mlflow,
    require_prompt_registry,
    tracking_uri,
)

__all__ = [
    "DEFAULT_ALIAS",
    "FINISH_TIMEOUT_S",
    "STATE_FILE",
    "URI_ENVS",
    "PromptExport",
    "gepa_version",
    "mlflow_tracking",
    "prompt_export",
    "register_prompt",
    "require_mlflow",
    "require_prompt_registry",
    "tracking_uri",
]
