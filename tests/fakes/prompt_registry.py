"""A fake of MLflow's prompt-registry REST reads (the two the SDKs make), for unit tests.

Prompts are registered models whose versions carry their text in the ``mlflow.prompt.text``
tag, as MLflow stores them; the real server is in ``tests/e2e/test_prompt_registry_e2e.py``.
``app.state.auth`` records the Authorization header of each request.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["registry_app"]


def registry_app(
    versions: dict[str, dict[int, tuple[str, dict[str, str]]]],
    aliases: dict[tuple[str, str], int],
) -> Starlette:
    """``versions``: name -> number -> (text, extra tags); ``aliases``: (name, alias) -> number."""

    def answer(name: str, number: int | None) -> JSONResponse:
        found = versions.get(name, {}).get(number) if number is not None else None
        if found is None:
            body = {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"{name} not found"}
            return JSONResponse(body, status_code=404)
        text, tags = found
        all_tags = {"mlflow.prompt.is_prompt": "true", "mlflow.prompt.text": text, **tags}
        version = {
            "name": name,
            "version": str(number),
            "tags": [{"key": k, "value": v} for k, v in all_tags.items()],
        }
        return JSONResponse({"model_version": version})

    async def by_alias(request: Request) -> JSONResponse:
        request.app.state.auth.append(request.headers.get("authorization"))
        name, alias = request.query_params["name"], request.query_params["alias"]
        return answer(name, aliases.get((name, alias)))

    async def by_version(request: Request) -> JSONResponse:
        request.app.state.auth.append(request.headers.get("authorization"))
        return answer(request.query_params["name"], int(request.query_params["version"]))

    app = Starlette(
        routes=[
            Route("/api/2.0/mlflow/registered-models/alias", by_alias),
            Route("/api/2.0/mlflow/model-versions/get", by_version),
        ]
    )
    app.state.auth = []
    return app
