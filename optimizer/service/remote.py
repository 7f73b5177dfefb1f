"""A client of a running ``gepa-runtime serve``: what ``optimize ... --server URL`` uses.

Requests go through one ``httpx.AsyncClient``; the event stream is read line by line and
re-opened with ``Last-Event-ID`` when the connection drops (a service restart), so a
follower sees every event once. Refusals become ``UserError``s that name the fix.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from schemas import Event, GepaError, RunConfig, UserError

__all__ = ["ServiceClient"]

RECONNECT_FOR_S = 60.0


def _config_body(config: RunConfig) -> dict[str, Any]:
    body = config.model_dump(mode="json", exclude_defaults=True)
    if (
        config.container_token is not None
    ):  # model_dump masks it; the service keeps it in memory only
        body["container_token"] = config.container_token.get_secret_value()
    return body


class ServiceClient:
    """Create, start and follow runs on a service at ``base_url``."""

    def __init__(
        self, base_url: str, *, token: str | None = None, http: httpx.AsyncClient | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._owns = http is None
        self._http = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=60.0))
        self._http.headers.update(headers)

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owns:
            await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.base_url}{path}"
        try:
            response = await self._http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise UserError(
                f"cannot reach the gepa-runtime service at {self.base_url} ({type(exc).__name__}: {exc}); "
                "start it with `gepa-runtime serve` or fix --server URL"
            ) from exc
        if response.status_code == 401:
            raise UserError(
                f"the service at {self.base_url} refused the token: pass --server-token TOKEN "
                "(or GEPA_SERVE_TOKEN) with the value given to `gepa-runtime serve --token`"
            )
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            error = UserError if response.status_code < 500 else GepaError
            raise error(f"{method} {path} on {self.base_url}: {message}")
        return response.json()

    async def create(
        self, config: RunConfig, *, run_id: str | None = None, start: bool = False
    ) -> dict[str, Any]:
        """``POST /api/runs``; the run view."""
        body: dict[str, Any] = {"config": _config_body(config), "start": start}
        if run_id is not None:
            body["run_id"] = run_id
        return await self._request("POST", "/api/runs", json=body)  # type: ignore[no-any-return]

    async def start(self, run_id: str) -> dict[str, Any]:
        """``POST /api/runs/{id}/start``."""
        return await self._request("POST", f"/api/runs/{run_id}/start")  # type: ignore[no-any-return]

    async def run(self, run_id: str) -> dict[str, Any]:
        """``GET /api/runs/{id}``."""
        return await self._request("GET", f"/api/runs/{run_id}")  # type: ignore[no-any-return]

    async def evidence(self, run_id: str) -> dict[str, Any]:
        """``GET /api/runs/{id}/evidence``."""
        return await self._request("GET", f"/api/runs/{run_id}/evidence")  # type: ignore[no-any-return]

    async def follow(
        self, run_id: str, on_event: Callable[[Event], None], *, after: int = 0
    ) -> dict[str, Any]:
        """Read the run's events until its ``end``; returns the ``end`` data (status, error)."""
        last, failing_since = after, None
        while True:
            try:
                end = await self._stream(run_id, last, on_event)
            except httpx.HTTPError as exc:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > RECONNECT_FOR_S:
                    raise UserError(
                        f"lost the event stream of run {run_id} from {self.base_url} for {RECONNECT_FOR_S:.0f} s "
                        f"({type(exc).__name__}); follow it again with `gepa-runtime optimize run {run_id} --server URL`"
                    ) from exc
                await asyncio.sleep(1.0)
                continue
            if isinstance(end, int):
                last, failing_since = end, None
                continue
            return end

    async def _stream(
        self, run_id: str, after: int, on_event: Callable[[Event], None]
    ) -> dict[str, Any] | int:
        """One connection: the ``end`` data, or the last seq seen when the stream closed early."""
        headers = {"Last-Event-ID": str(after)}
        async with self._http.stream(
            "GET", f"{self.base_url}/api/runs/{run_id}/events", headers=headers
        ) as response:
            if response.status_code != 200:
                await response.aread()
                await self._raise(response)
            kind, data = None, []
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line == "" and data:
                    payload = json.loads("\n".join(data))
                    if kind == "end":
                        if payload.get("reason"):  # the service is stopping: wait and reconnect
                            raise httpx.RemoteProtocolError(str(payload["reason"]))
                        return dict(payload)
                    if kind is None:
                        event = Event.model_validate(payload)
                        after = event.seq
                        on_event(event)
                    kind, data = None, []
        return after

    async def _raise(self, response: httpx.Response) -> None:
        if response.status_code == 401:
            raise UserError(
                f"the service at {self.base_url} refused the token: pass --server-token TOKEN (or GEPA_SERVE_TOKEN)"
            )
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:500]
        raise UserError(f"GET events on {self.base_url}: {message}")
