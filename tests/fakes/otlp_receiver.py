"""A real OTLP/HTTP trace receiver for tests: ``POST /v1/traces``, protobuf or JSON.

It decodes each export request into plain spans (name, hex trace and span ids, attributes)
and keeps them in ``app.state.spans``, as a collector would before storing them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _decode(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    if "json" in content_type:
        data = json.loads(body)
        # OTLP/JSON writes ids as hex; the protobuf JSON mapping wants base64 bytes
        for resource in data.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        ParseDict(data, request)
    else:
        request.ParseFromString(body)
    return request


def create_app() -> Starlette:
    """The receiver; ``app.state.spans`` lists every span received, in order."""

    async def traces(request: Request) -> Response:
        decoded = _decode(await request.body(), request.headers.get("content-type", ""))
        for resource in decoded.resource_spans:
            service = {a.key: _value(a.value) for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    request.app.state.spans.append(
                        {
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "service": service.get("service.name"),
                        }
                    )
        return Response(
            ExportTraceServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    app.state.spans = []
    return app
