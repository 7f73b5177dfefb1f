"""Everything gepa-runtime persists, behind one interface: :class:`Workspace`.

Two engines. The default is a folder (``./.gepa``, ``--workspace DIR`` or
``GEPA_WORKSPACE``) holding ``workspace.sqlite`` (runs, candidates with lineage, the rollout
cache, per-seed frontier state, the trials feed, the event log, run leases) and
``runs/<run_id>/`` with the evidence files; one process writes it, others read it
(``readonly=True``). ``--workspace postgresql://USER@HOST:PORT/DBNAME`` puts the same
tables, and the run files, in PostgreSQL, which processes on several hosts share
(:mod:`workspace.postgres`, ``pip install 'gepa-runtime[postgres]'``). Runners that share a
store claim the rollouts they pay for (:mod:`workspace.claims`) and keep one adaptive limit per
container endpoint (:mod:`workspace.endpoint_limits`).
"""

from __future__ import annotations

from workspace.claims import Claimant, ClaimSplit, Holder, new_claimant
from workspace.codec import MIN_TRACE_CAP, decode_trace, encode_trace, strict_json
from workspace.endpoint_limits import Member
from workspace.lease import HEARTBEAT_S, LEASE_TIMEOUT_S, Lease, Takeover, leased_message
from workspace.location import DatabaseURL, mask_url, workspace_target
from workspace.migrations import MIGRATIONS, SCHEMA_VERSION, Migration
from workspace.redact import scrub, scrub_text
from workspace.store import DEFAULT_WORKSPACE, Workspace, resolve_workspace

__all__ = [
    "DEFAULT_WORKSPACE",
    "HEARTBEAT_S",
    "LEASE_TIMEOUT_S",
    "MIGRATIONS",
    "MIN_TRACE_CAP",
    "SCHEMA_VERSION",
    "ClaimSplit",
    "Claimant",
    "DatabaseURL",
    "Holder",
    "Lease",
    "Member",
    "Migration",
    "Takeover",
    "Workspace",
    "decode_trace",
    "encode_trace",
    "leased_message",
    "mask_url",
    "new_claimant",
    "resolve_workspace",
    "scrub",
    "scrub_text",
    "strict_json",
    "workspace_target",
]
