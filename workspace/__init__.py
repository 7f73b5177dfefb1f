"""Everything gepa-runtime persists: ``workspace.sqlite`` (aiosqlite) and the run folders.

The workspace folder (``./.gepa`` by default, ``--workspace DIR`` or ``GEPA_WORKSPACE``)
holds ``workspace.sqlite`` (runs, candidates with lineage, the rollout cache, per-seed
frontier state, the trials feed, the event log) and ``runs/<run_id>/`` with the evidence
files. :class:`Workspace` is its only writer; other processes open it ``readonly=True``.
"""

from __future__ import annotations

from workspace.codec import MIN_TRACE_CAP, decode_trace, encode_trace, strict_json
from workspace.lease import HEARTBEAT_S, LEASE_TIMEOUT_S, Lease, Takeover, leased_message
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
    "Lease",
    "Migration",
    "Takeover",
    "Workspace",
    "decode_trace",
    "encode_trace",
    "leased_message",
    "resolve_workspace",
    "scrub",
    "scrub_text",
    "strict_json",
]
