"""What a run config sent to the service may ask of the service's own process.

A config from the API is written by whoever reaches the service, not by its operator, and
some of its fields act inside the service's process: ``reflection_api_key_env`` (any
``*_env`` field) names an environment variable whose value is sent as a bearer token to
``reflection_base_url``, ``module`` imports and runs Python code, and ``proposer_command``
runs a shell command (with the variables ``proposer_env`` names). So the operator
decides: key variables come from an allowlist (``serve --allow-key-env NAME``), modules
(and the dataset, splits and verifier files they read) only from folders the operator
named (``serve --allow-modules DIR``), commands only with ``serve --allow-proposer-command``,
and ``mlflow_tracking_uri`` only as an http(s) server (a ``file:`` or ``sqlite:`` URI would
write where the caller says). The CLI keeps its freedom: its user is the operator.

    policy = RunPolicy(key_envs=frozenset({"OPENAI_API_KEY"}), module_roots=(Path("agents"),))
    policy.check(config)   # PolicyRefusal naming the field and the fix
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from container.loader import split_spec
from container.specs import BUILTIN_TYPES
from optimizer.runtime.lifecycle.run_inputs import is_workspace_ref
from proposer.client import resolve_endpoint
from proposer.types import ProposerConfig
from schemas import RunConfig, UserError

__all__ = ["DEFAULT_KEY_ENVS", "PolicyRefusal", "RunPolicy"]

# The variables the runtime itself reads keys from: the default of reflection_api_key_env,
# the one an ``openrouter/`` model switches to, and the conventional GEPA_ one.
DEFAULT_KEY_ENVS = ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEPA_REFLECTION_API_KEY")
_PATH_FIELDS = ("dataset", "splits_file")


class PolicyRefusal(UserError):
    """The config asks for something the operator did not allow (403)."""


@dataclass(frozen=True)
class RunPolicy:
    """The operator's allowlists. No ``module_roots``: the service imports no module."""

    key_envs: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_KEY_ENVS))
    module_roots: tuple[Path, ...] = ()
    # ``serve --allow-proposer-command``: runs may name a shell command to run on this host.
    allow_commands: bool = False

    def check(self, config: RunConfig) -> None:
        """Raise ``PolicyRefusal`` for the first field the operator did not allow."""
        for name, variable in _key_envs(config):
            if variable not in self.key_envs:
                allowed = ", ".join(sorted(self.key_envs)) or "none"
                raise PolicyRefusal(
                    f"config.{name}: the service does not read ${variable} for a run (allowed: "
                    f"{allowed}); name one of those, or have the operator restart it with "
                    f"`gepa-runtime serve --allow-key-env {variable}`"
                )
        if config.module is not None:
            self._check_module_fields(config)
        if config.proposer_command is not None or config.proposer_env:
            self._check_command(config)
        if config.mlflow_tracking_uri is not None:
            _check_tracking_uri(config.mlflow_tracking_uri)

    def _check_command(self, config: RunConfig) -> None:
        """A proposer command runs on the service's host as its user: only when the operator
        said so; the variables it may see come from the key allowlist like any ``*_env``."""
        if config.proposer_command is not None and not self.allow_commands:
            raise PolicyRefusal(
                "config.proposer_command: this service runs no command for a run; use the "
                "built-in proposer (reflection_model), run `gepa-runtime optimize run "
                "--proposer-command ...` yourself, or have the operator restart it with "
                "`gepa-runtime serve --allow-proposer-command`"
            )
        for name in config.proposer_env:
            if name not in self.key_envs:
                allowed = ", ".join(sorted(self.key_envs)) or "none"
                raise PolicyRefusal(
                    f"config.proposer_env: the service does not pass ${name} to a command "
                    f"(allowed: {allowed}); drop it, or have the operator restart it with "
                    f"`gepa-runtime serve --allow-key-env {name}`"
                )

    def _check_module_fields(self, config: RunConfig) -> None:
        if not self.module_roots:
            raise PolicyRefusal(
                "config.module: this service imports no Python module for a run; give "
                "containers [URL] of a running `gepa-runtime container MODULE`, or have the "
                "operator restart it with `gepa-runtime serve --allow-modules DIR`"
            )
        self._inside_roots("module", config.module or "", code=True)
        # ``workspace:`` paths name the copies `optimize create` made in this service's own
        # workspace (optimizer.runtime.lifecycle.run_inputs refuses any that leave its run folders)
        for name in _PATH_FIELDS:
            value = getattr(config, name)
            if value is not None and not is_workspace_ref(value):
                self._inside_roots(name, value, code=False)
        verifier = config.verifier
        if (
            verifier is not None
            and verifier not in BUILTIN_TYPES
            and not is_workspace_ref(verifier)
        ):
            module, function = split_spec(verifier)
            self._inside_roots(
                "verifier", module if function else verifier, code=function is not None
            )

    def _inside_roots(self, name: str, value: str, *, code: bool) -> None:
        """``value`` must be a file path inside a module root (code: a ``.py`` path, not a
        dotted name, which the import path could resolve anywhere)."""
        roots = ", ".join(str(r) for r in self.module_roots)
        if code and not value.endswith(".py"):
            raise PolicyRefusal(
                f"config.{name}: {value!r} is not a .py file path; the service imports modules "
                f"only as files inside {roots} (allowed with `gepa-runtime serve --allow-modules DIR`)"
            )
        path = Path(value).expanduser().resolve()
        if not any(path.is_relative_to(root.resolve()) for root in self.module_roots):
            raise PolicyRefusal(
                f"config.{name}: {value} is outside the folders this service reads run files "
                f"from ({roots}); move it there, or have the operator restart the service with "
                f"`gepa-runtime serve --allow-modules {path.parent}`"
            )


def _check_tracking_uri(uri: str) -> None:
    """An MLflow tracking server only: a ``file:`` or ``sqlite:`` URI would have the service
    write its files wherever the caller says."""
    if not uri.startswith(("http://", "https://")):
        raise PolicyRefusal(
            f"config.mlflow_tracking_uri: the service logs runs only to an MLflow tracking "
            f"server (http:// or https://), not to {uri.split(':', 1)[0]!r}; give the server's "
            "URL, or have the operator set MLFLOW_TRACKING_URI for the service"
        )


def _key_envs(config: RunConfig) -> Iterator[tuple[str, str]]:
    """(field, variable) of every environment variable the config makes the service read."""
    for name in type(config).model_fields:
        value = getattr(config, name)
        if not (name.endswith("_env") and isinstance(value, str)):
            continue
        if name == "reflection_api_key_env" and config.reflection_model:
            # what the proposer really reads: an ``openrouter/`` model switches variables
            value = resolve_endpoint(ProposerConfig.from_run_config(config)).api_key_env
        yield name, value
