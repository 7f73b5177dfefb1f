"""Everything gepa-runtime persists: ``workspace.sqlite`` (aiosqlite) and the run folders.

The workspace folder (``./.gepa`` by default, ``--workspace DIR`` or ``GEPA_WORKSPACE``)
holds ``workspace.sqlite`` (runs, candidates with lineage, the rollout cache, per-seed
frontier state, the trials feed, the event log) and ``runs/<run_id>/`` with the evidence
files. :class:`Workspace` is its only writer; other processes open it ``readonly=True``.
"""

from __future__ import annotations

from workspace.codec import MIN_TRACE_CAP, decode_trace, encode_trace
from workspace.migrations import MIGRATIONS, SCHEMA_VERSION, Migration
from workspace.redact import scrub, scrub_text
from workspace.store import DEFAULT_WORKSPACE, Workspace, resolve_workspace

__all__ = [
    "DEFAULT_WORKSPACE",
    "MIGRATIONS",
    "MIN_TRACE_CAP",
    "SCHEMA_VERSION",
    "Migration",
    "Workspace",
    "decode_trace",
    "encode_trace",
    "resolve_workspace",
    "scrub",
    "scrub_text",
]
