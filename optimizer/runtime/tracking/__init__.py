"""Experiment tracking: a run's events mirrored into MLflow (``--mlflow``).

- :mod:`optimizer.runtime.tracking.tracker`: ``mlflow_tracking``, the listener of one run
  (on or off, the MLflow run kept across a resume, the bounded wait at the end);
- :mod:`optimizer.runtime.tracking.ops`: what is logged, as plain operations (pure);
- :mod:`optimizer.runtime.tracking.worker`: the thread that makes the blocking MLflow calls.
"""

from __future__ import annotations

from optimizer.runtime.tracking.tracker import (
    FINISH_TIMEOUT_S,
    STATE_FILE,
    URI_ENVS,
    mlflow_tracking,
    require_mlflow,
    tracking_uri,
)

__all__ = [
    "FINISH_TIMEOUT_S",
    "STATE_FILE",
    "URI_ENVS",
    "mlflow_tracking",
    "require_mlflow",
    "tracking_uri",
]
