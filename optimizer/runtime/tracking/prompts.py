"""The winner in MLflow's prompt registry: a new prompt version per finished run.

``runs export RUN_ID --mlflow-prompt NAME``, and ``--mlflow-prompt NAME`` on a run (at its
end, after the evidence packet, by the tracking thread), register a version of the prompt
``NAME`` whose text is the best candidate's (:func:`schemas.prompt_file.registry_text`: its one
text, or the JSON of its components), tagged with what the evidence says of it: the run, the
candidate, the paired lift and its 95% interval, the seeds it was measured on, whether the
run promoted it, and the version of gepa-runtime. The alias (``candidate`` by default) is
moved to the new version only when the run promoted it, so an application that loads
``prompts:/NAME@candidate`` never gets a text the run did not promote.

``prompt_export`` is pure (what to register); ``register_prompt`` makes the blocking calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from schemas.prompt_file import registry_text

__all__ = [
    "DEFAULT_ALIAS",
    "PromptExport",
    "RegisterPrompt",
    "gepa_version",
    "prompt_export",
    "register_prompt",
]

DEFAULT_ALIAS = "candidate"


def gepa_version() -> str:
    """The installed gepa-runtime's version (``unknown`` from a source tree never installed)."""
    try:
        return version("gepa-runtime")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class PromptExport:
    """One prompt version to register, and the alias to point at it (``None``: none)."""

    name: str
    text: str
    tags: Mapping[str, str]
    commit_message: str
    alias: str | None


@dataclass(frozen=True)
class RegisterPrompt:
    """The tracking thread's operation: register ``export`` (after the run's artifacts)."""

    export: PromptExport
    extra_tags: Mapping[str, str] = field(default_factory=dict)


def prompt_export(packet: Mapping[str, Any], name: str, alias: str = DEFAULT_ALIAS) -> PromptExport:
    """The version a run's evidence packet makes: the best's text and the verdict as tags."""
    promo, best = packet["promotion"], packet["best"]
    text, format_tags = registry_text(best["components"])
    measured = str(promo.get("measured_on", "holdout"))
    tags = {
        "gepa.run_id": str(packet["run_id"]),
        "gepa.candidate_id": str(best["candidate_id"]),
        "gepa.program_id": str(packet["program"]["program_id"]),
        "gepa.lift": repr(float(promo["lift"])),
        "gepa.ci_low": repr(float(promo["ci_low"])),
        "gepa.ci_high": repr(float(promo["ci_high"])),
        "gepa.confidence": str(promo.get("confidence", 0.95)),
        "gepa.measured_on": measured,
        f"gepa.{measured}_size": str(promo["n"]),
        "gepa.promoted": str(bool(promo["promoted"])).lower(),
        "gepa.version": gepa_version(),
        **format_tags,
    }
    message = (
        f"gepa-runtime run {packet['run_id']}: candidate {best['candidate_id']}, lift "
        f"{promo['lift']:+.3f} (95% CI [{promo['ci_low']:+.3f}, {promo['ci_high']:+.3f}]) on "
        f"{promo['n']} {measured} seeds, {'promoted' if promo['promoted'] else 'not promoted'}"
    )
    return PromptExport(
        name=name,
        text=text,
        tags=tags,
        commit_message=message,
        alias=alias if promo["promoted"] else None,
    )


def register_prompt(
    client: Any, export: PromptExport, extra_tags: Mapping[str, str] | None = None
) -> int:
    """Register ``export`` with an ``MlflowClient``; the new version's number."""
    registered = client.register_prompt(
        name=export.name,
        template=export.text,
        commit_message=export.commit_message,
        tags={**export.tags, **(extra_tags or {})},
    )
    number = int(registered.version)
    if export.alias is not None:
        client.set_prompt_alias(export.name, export.alias, number)
    return number
