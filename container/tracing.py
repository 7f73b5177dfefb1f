"""OpenTelemetry spans around rollouts: one ``optimize:<target id>`` span per evaluated example.

Optional (``pip install 'gepa-runtime[otel]'``): without the ``opentelemetry`` packages
every function here does nothing and rollouts are served exactly as before.

With them, each ``POST /rollout`` runs inside a span named ``optimize:<target id>`` whose
attributes are ``gepa.run_id``, ``gepa.candidate_id``, ``gepa.seed``, ``gepa.split``,
``gepa.target_id`` and, once scored, ``gepa.reward``; spans the agent opens (an instrumented
model client) are its children. The span's ids go into the rollout's trace as an
``otel_span`` event (:mod:`schemas.trace_ids`), so the optimizer's console shows which trace
each trial ran in.

Where spans go: to the tracer provider the agent's process installed, if any; else, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set,
:func:`configure_tracing` (called when a container app is built) installs one with the
OTLP/HTTP exporter, which reads the other standard ``OTEL_EXPORTER_OTLP_*`` and
``OTEL_BSP_*`` variables (headers, timeout, batch delay) itself. With neither, spans are
not recorded and no event is added.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from schemas import RolloutRequest
from schemas.trace_ids import span_event

__all__ = ["RolloutSpan", "configure_tracing", "rollout_span"]

_TRACER = "gepa-runtime.container"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

try:  # the optional extra: absent, tracing is off
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - exercised by the test that hides the package
    otel_trace = None  # type: ignore[assignment]


def configure_tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Install an OTLP/HTTP exporter when the standard variables ask for one.

    Leaves a tracer provider the process already installed alone. Returns whether rollout
    spans are recorded by some provider.
    """
    if otel_trace is None:
        return False
    provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, otel_trace.ProxyTracerProvider):
        return True  # the agent's own provider (and exporters)
    env = os.environ if environ is None else environ
    if not any(env.get(name) for name in _ENDPOINTS):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return False  # the API without the SDK/exporter: nothing to export with
    sdk = TracerProvider(resource=Resource.create({"service.name": "gepa-container"}))
    sdk.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    otel_trace.set_tracer_provider(sdk)
    return True


class RolloutSpan:
    """The span of one rollout: record its reward, read the event that names it."""

    def __init__(self, span: Any, name: str) -> None:
        self._span = span
        self._name = name

    def finish(self, reward: float) -> dict[str, Any] | None:
        """Set ``gepa.reward``; the trace event naming this span (None when not recorded)."""
        self._span.set_attribute("gepa.reward", float(reward))
        context = self._span.get_span_context()
        if not context.is_valid:
            return None
        return span_event(self._name, context.trace_id, context.span_id)


@contextlib.contextmanager
def rollout_span(
    target_id: str, request: RolloutRequest, split: str | None
) -> Iterator[RolloutSpan | None]:
    """The rollout's span, current while the target and the verifier run (None: tracing off).

    An exception leaving the block is recorded on the span (status ERROR) and re-raised.
    """
    if otel_trace is None:
        yield None
        return
    name = f"optimize:{target_id}"
    attributes = {
        "gepa.target_id": target_id,
        "gepa.run_id": request.run_id or "",
        "gepa.candidate_id": request.candidate_id or "",
        "gepa.seed": request.seed,
        "gepa.split": split or "",
    }
    tracer = otel_trace.get_tracer(_TRACER)
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        yield RolloutSpan(span, name)
