"""Only the service's own pages and non-browser clients may drive it: Host and Origin checks.

A web page the user visits can send requests to ``127.0.0.1`` (cross-site request forgery)
and, by pointing its own host name at ``127.0.0.1`` (DNS rebinding), even read the answers.
Both leave a trace a browser cannot hide:

- a rebound request carries the attacker's name in ``Host``: a request whose ``Host`` is not
  one the service answers to (the loopback names at its port, or ``--allowed-host``) is
  refused, whatever its method;
- a cross-site ``POST``/``PUT``/``PATCH``/``DELETE`` carries the page's ``Origin`` (or a
  ``Referer``): one that is present and not the service's own origin is refused.

Clients outside a browser (the CLI, curl) send neither header and pass. Refusals are 403
JSON errors that name the fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from optimizer.service.auth import error_json

__all__ = ["LOOPBACK_HOSTS", "SameOrigin", "host_entries"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def host_entries(hosts: Iterable[str], port: int | None) -> tuple[str, ...]:
    """``host:port`` entries for ``hosts`` (``host`` alone, any port, when ``port`` is None)."""
    return tuple(h.lower() if port is None else f"{h.lower()}:{port}" for h in hosts)


def _split(host: str) -> tuple[str, str | None]:
    """``"h:8700"`` -> ``("h", "8700")``; ``"[::1]:8700"`` -> ``("[::1]", "8700")``."""
    name, sep, port = host.rpartition(":")
    if not sep or name.endswith(":") or (name.startswith("[") != name.endswith("]")):
        return host, None  # no port, or a bare IPv6 address
    return name, port


class SameOrigin:
    """ASGI middleware: refuse foreign ``Host`` headers and cross-origin state changes.

    ``allowed`` holds ``host`` (any port) or ``host:port`` entries, lower case.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self._allowed = frozenset(a.lower() for a in allowed)

    def _host_allowed(self, host: str) -> bool:
        name, port = _split(host)
        return (
            host in self._allowed
            or name in self._allowed
            or (port is None and f"{name}:80" in self._allowed)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").strip().lower()
        if not self._host_allowed(host):
            allowed = ", ".join(sorted(self._allowed))
            refusal = error_json(
                403,
                "ForeignHost",
                f"Host {host or '(none)'!r} is not an address of this service (it answers to "
                f"{allowed}); open it by one of those, or start it with "
                f"`gepa-runtime serve --allowed-host {host or 'NAME:PORT'}` to add one",
            )
            await refusal(scope, receive, send)
            return
        if scope.get("method") in UNSAFE_METHODS:
            source = headers.get("origin") or headers.get("referer")
            if source is not None and urlsplit(source).netloc.lower() != host:
                refusal = error_json(
                    403,
                    "CrossOrigin",
                    f"{scope['method']} from {source!r} refused: only the service's own console "
                    f"(http://{host}) may change runs from a browser; use the console, the CLI "
                    "(`gepa-runtime optimize ... --server URL`) or an HTTP client without an "
                    "Origin header",
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
