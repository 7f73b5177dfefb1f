"""The optimizer service: runs optimizations in the background behind a REST API and a console.

``gepa-runtime serve`` runs :func:`create_app` on uvicorn. Runs are asyncio tasks of one
:class:`RunManager` (concurrent, resumed after a restart); their events stream as SSE and
feed the live console (``/`` and ``/runs/<id>``, static files in ``static/``). No web page
may drive it (``origin``, ``bodies``, ``auth``) and a run config from the API may only read
the key variables and module folders the operator allowed (:class:`RunPolicy`).
:class:`ServiceClient` is the other end, used by ``optimize ... --server URL``.
"""

from __future__ import annotations

from optimizer.service.app import ServiceSettings, create_app
from optimizer.service.digest import Digests, RunDigest
from optimizer.service.manager import OWNER_FILE, RunConflict, RunManager
from optimizer.service.openapi import openapi_spec
from optimizer.service.policy import DEFAULT_KEY_ENVS, PolicyRefusal, RunPolicy
from optimizer.service.remote import ServiceClient
from optimizer.service.sse import StreamSettings, format_sse
from optimizer.service.views import candidate_views, run_view, trial_views

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
