"""Where a rollout's trace names the trace it belongs to in the user's tracing backend.

The container SDK runs each rollout inside an OpenTelemetry span (``container.tracing``)
and records it as an event of the rollout's trace: ``{"type": "otel_span", "name":
"optimize:<target id>", "trace_id": "<32 hex>", "span_id": "<16 hex>"}``. A target may also
return its own ``AgentResult.trace_id`` (the ``agent_result`` event). The workspace keeps
:func:`trace_id_of` in a column of its own, so the console's trials feed can show the id
without reading every trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SPAN_EVENT", "span_event", "trace_id_of"]

SPAN_EVENT = "otel_span"


def span_event(name: str, trace_id: int, span_id: int) -> dict[str, Any]:
    """The trace event of one span, its ids in the W3C hex form backends display."""
    return {
        "type": SPAN_EVENT,
        "name": name,
        "trace_id": format(trace_id, "032x"),
        "span_id": format(span_id, "016x"),
    }


def trace_id_of(trace: Mapping[str, Any]) -> str | None:
    """The trace id a rollout's trace names: its span's, else the agent's own, else None."""
    events = trace.get("events") if isinstance(trace, Mapping) else None
    found: dict[str, str] = {}
    for event in events if isinstance(events, list) else []:
        if isinstance(event, Mapping) and isinstance(event.get("trace_id"), str):
            found.setdefault(str(event.get("type")), event["trace_id"])
    return found.get(SPAN_EVENT) or found.get("agent_result")
