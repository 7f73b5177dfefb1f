"""The optimizer service: runs optimizations in the background behind a REST API and a console.

``gepa-runtime serve`` runs :func:`create_app` on uvicorn. Runs are asyncio tasks of one
:class:`RunManager` (concurrent, resumed after a restart); their events stream as SSE and
feed the live console (``/`` and ``/runs/<id>``, static files in ``static/``). No web page
may drive it (``origin``, ``bodies``, ``auth``) and a run config from the API may only read
the key variables and module folders the operator allowed (:class:`RunPolicy`).
:class:`ServiceClient` is the other end, used by ``optimize ... --server URL``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optimizer.service.app import ServiceSettings, create_app
    from optimizer.service.digest import Digests, RunDigest
    from optimizer.service.manager import OWNER_FILE, RunConflict, RunManager
    from optimizer.service.openapi import openapi_spec
    from optimizer.service.policy import DEFAULT_KEY_ENVS, PolicyRefusal, RunPolicy
    from optimizer.service.remote import ServiceClient
    from optimizer.service.sse import StreamSettings, format_sse
    from optimizer.service.views import candidate_views, run_view, trial_views

# Each public name's module, imported on first use: ``optimize --server`` needs only the
# client (``remote``), not the app's starlette and static files.
_HOMES = {
    "DEFAULT_KEY_ENVS": "policy",
    "OWNER_FILE": "manager",
    "Digests": "digest",
    "PolicyRefusal": "policy",
    "RunConflict": "manager",
    "RunDigest": "digest",
    "RunManager": "manager",
    "RunPolicy": "policy",
    "ServiceClient": "remote",
    "ServiceSettings": "app",
    "StreamSettings": "sse",
    "candidate_views": "views",
    "create_app": "app",
    "format_sse": "sse",
    "openapi_spec": "openapi",
    "run_view": "views",
    "trial_views": "views",
}

__all__ = [
    "DEFAULT_KEY_ENVS",
    "OWNER_FILE",
    "Digests",
    "PolicyRefusal",
    "RunConflict",
    "RunDigest",
    "RunManager",
    "RunPolicy",
    "ServiceClient",
    "ServiceSettings",
    "StreamSettings",
    "candidate_views",
    "create_app",
    "format_sse",
    "openapi_spec",
    "run_view",
    "trial_views",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
