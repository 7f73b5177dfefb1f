"""Environment variable names: ours (``GEPA_*``), the product docs' (``ROLLOUT_*``), old ones.

Every run-config field has a ``GEPA_<FIELD>`` variable, except the student model, whose one
name on both planes is ``GEPA_STUDENT_MODEL`` (the optimizer sends it as the rollout policy,
containers call it). The product docs users copy from call our product ``rollout``: their
``ROLLOUT_GEPA_<NAME>`` is an alias of our ``GEPA_<NAME>`` (``ROLLOUT_GEPA_REFLECTION_MODEL``,
``ROLLOUT_GEPA_STUDENT_MODEL``, ``ROLLOUT_GEPA_CONCURRENCY``, ...), their ``ROLLOUT_BASE_URL``
and ``ROLLOUT_API_KEY`` (a self-hosted control plane and its key) are our ``GEPA_SERVER`` and
``GEPA_SERVE_TOKEN``. ``GEPA_TASK_MODEL``, the optimizer's old name for the student model,
still works with a warning.

Two names of one setting set to different values are a ``UserError`` naming both: guessing
which one the user meant would run the wrong model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from schemas.exceptions import UserError

__all__ = ["DEPRECATED", "config_env", "env_names", "read_env"]

# deprecated name -> canonical name
DEPRECATED = {"GEPA_TASK_MODEL": "GEPA_STUDENT_MODEL"}
_FIELD_ENV = {"task_model": "GEPA_STUDENT_MODEL"}
_DOC_NAMES = {"GEPA_SERVER": ("ROLLOUT_BASE_URL",), "GEPA_SERVE_TOKEN": ("ROLLOUT_API_KEY",)}
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")


def config_env(field: str) -> str:
    """The canonical variable of the run-config field ``field``."""
    return _FIELD_ENV.get(field, "GEPA_" + field.upper())


def env_names(name: str) -> tuple[str, ...]:
    """``name`` and its aliases: the docs' ``ROLLOUT_`` names, then deprecated ones."""
    names = [name, *_DOC_NAMES.get(name, ())]
    if name.startswith("GEPA_"):
        names.append("ROLLOUT_" + name)
    names += [old for old, new in DEPRECATED.items() if new == name]
    return tuple(names)


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def read_env(
    name: str,
    environ: Mapping[str, str] | None = None,
    *,
    warn: Callable[[str], None] = _stderr,
) -> str | None:
    """The value of the canonical variable ``name`` or of one of its aliases (None: unset).

    Empty values count as unset. A deprecated name that is set is reported through ``warn``.
    """
    env = os.environ if environ is None else environ
    given = {n: env[n] for n in env_names(name) if env.get(n)}
    if len(set(given.values())) > 1:
        secret = any(word in name for word in _SECRET_WORDS)
        shown = ", ".join(n if secret else f"{n}={v!r}" for n, v in given.items())
        raise UserError(
            f"{shown} set the same setting to different values: unset all but one "
            f"(the name to keep is {name})"
        )
    for old in given:
        if old in DEPRECATED:
            warn(f"{old} is deprecated: set {DEPRECATED[old]} instead (same meaning)")
    return next(iter(given.values()), None)
