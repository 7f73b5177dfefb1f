"""Read a version of MLflow's prompt registry over its REST API (no MLflow package needed).

A prompt is stored by MLflow as a registered model whose versions carry the text in the tag
``mlflow.prompt.text``; an alias points at one version. The server is the tracking server of
``GEPA_MLFLOW_TRACKING_URI`` or ``MLFLOW_TRACKING_URI`` (http or https), with
``MLFLOW_TRACKING_TOKEN`` (bearer) or ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``
(basic) when it needs them, as MLflow's own client reads them. The TypeScript SDK reads it the
same way (``container/typescript/src/registry.ts``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from schemas import UserError
from schemas.prompt_file import RegistryRef

__all__ = ["PROMPT_TEXT_TAG", "RegistryPrompt", "fetch_prompt", "registry_uri"]

PROMPT_TEXT_TAG = "mlflow.prompt.text"
URI_ENVS = ("GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI")
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RegistryPrompt:
    """One prompt version: its text, its version number and its tags."""

    ref: RegistryRef
    text: str
    version: int
    tags: Mapping[str, str] = field(default_factory=dict)


def registry_uri(environ: Mapping[str, str] | None = None) -> str:
    """The tracking server to read prompts from; ``UserError`` naming the variable when unset."""
    env = os.environ if environ is None else environ
    uri = next((env[name] for name in URI_ENVS if env.get(name)), None)
    if uri is None:
        raise UserError(
            "a prompts:/ baseline needs the MLflow tracking server that holds the prompt: set "
            "MLFLOW_TRACKING_URI=http://HOST:PORT (or load the prompt from a file exported "
            "with `gepa-runtime runs export RUN_ID --prompt-file PATH`)"
        )
    if not uri.startswith(("http://", "https://")):
        raise UserError(
            f"MLFLOW_TRACKING_URI={uri!r}: prompts are read from a tracking server over HTTP; "
            "point it at http(s)://HOST:PORT, or export the prompt to a file"
        )
    return uri.rstrip("/")


def _auth(env: Mapping[str, str]) -> dict[str, Any]:
    if env.get("MLFLOW_TRACKING_TOKEN"):
        return {"headers": {"Authorization": f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"}}
    if env.get("MLFLOW_TRACKING_USERNAME"):
        return {"auth": (env["MLFLOW_TRACKING_USERNAME"], env.get("MLFLOW_TRACKING_PASSWORD", ""))}
    return {}


def fetch_prompt(
    ref: RegistryRef,
    *,
    environ: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> RegistryPrompt:
    """The version ``ref`` names; ``UserError`` saying what to fix when it cannot be read."""
    env = os.environ if environ is None else environ
    base = registry_uri(env)
    if ref.alias is not None:
        path, params = "registered-models/alias", {"name": ref.name, "alias": ref.alias}
    else:
        path, params = "model-versions/get", {"name": ref.name, "version": str(ref.version)}
    try:
        with httpx.Client(timeout=TIMEOUT_S, transport=transport, **_auth(env)) as http:
            response = http.get(f"{base}/api/2.0/mlflow/{path}", params=params)
    except httpx.HTTPError as exc:
        raise UserError(
            f"cannot read {ref.uri} from the MLflow server at {base} ({type(exc).__name__}: "
            f"{exc}); start it or fix MLFLOW_TRACKING_URI"
        ) from exc
    if response.status_code == 404 or _error_code(response) == "RESOURCE_DOES_NOT_EXIST":
        raise UserError(
            f"{ref.uri} is not in the prompt registry at {base}: register a version with "
            f"`gepa-runtime runs export RUN_ID --mlflow-prompt {ref.name}` (an alias is set "
            "when the run was promoted), or name an alias or version that exists"
        )
    if response.status_code in (401, 403):
        raise UserError(
            f"the MLflow server at {base} refused to read {ref.uri} ({response.status_code}): "
            "set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        )
    if response.status_code != 200:
        raise UserError(
            f"the MLflow server at {base} answered {response.status_code} for {ref.uri}: "
            f"{response.text[:300]}"
        )
    return _prompt(ref, response.json().get("model_version") or {})


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error_code") if isinstance(body, dict) else None


def _prompt(ref: RegistryRef, version: Mapping[str, Any]) -> RegistryPrompt:
    tags = {str(t.get("key")): str(t.get("value")) for t in version.get("tags") or []}
    if PROMPT_TEXT_TAG not in tags:
        raise UserError(
            f"{ref.uri} names a registered model, not a prompt (its version has no "
            f"{PROMPT_TEXT_TAG} tag); name a prompt of the prompt registry"
        )
    return RegistryPrompt(
        ref=ref, text=tags[PROMPT_TEXT_TAG], version=int(version.get("version", 0)), tags=tags
    )
