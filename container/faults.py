"""How a failure becomes an HTTP answer: the status code, ``Retry-After`` and the error body.

Caller faults are ``RequestRejected`` with their 4xx status. A deterministic mistake in the
user's data or code (``UserMistake``, or any ``UserError``: a row that cannot be rendered or
scored, a target or verifier returning the wrong type) is a 422 naming the field and the fix:
retrying would only run the agent again to the same end. Infrastructure faults raised by a
target or verifier are retryable: ``openai.RateLimitError`` and ``Retryable(rate_limited=
True)`` -> 429; connection errors, timeouts, ``openai.InternalServerError`` and other
``Retryable`` -> 503. Anything else is a 500 naming the exception: never a made-up reward.

The ``openai`` package is not imported here (it costs the optimizer process, which imports the
SDK, about half a second of CPU): an ``openai`` exception can only exist once its package is
loaded, so its classes are looked up in ``sys.modules`` when one has to be recognised.
starlette is imported by the answers (``error_json``): the optimizer imports this module
through the SDK's data classes and never answers a request with it.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

import httpx

from schemas import ErrorBody, ErrorDetail, ProtocolViolation, Retryable, UserError

if TYPE_CHECKING:
    from starlette.responses import JSONResponse

__all__ = ["RequestRejected", "UserMistake", "error_kind", "error_response", "fault_status"]


class RequestRejected(ProtocolViolation):
    """The request is the caller's fault (or not authorized); answered with a 4xx, not retried."""

    def __init__(
        self, status: int, kind: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.kind = kind
        self.headers = headers or {}


class UserMistake(UserError):
    """A mistake every retry would repeat, answered 422 with ``kind`` as the error type.

    ``kind`` tells the mistakes apart for the caller (``TemplateMismatch``, ``MissingLabel``,
    ``BadLabel``, ``BadTargetResult``, ``BadScore``, ``CandidateMisuse``); the message names
    the seed or field and says what to change.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def fault_status(exc: BaseException) -> tuple[int, str | None]:
    """``(status, Retry-After or None)`` for an exception raised while serving a rollout."""
    if isinstance(exc, RequestRejected):
        return exc.status or 400, None
    if isinstance(exc, UserError):
        return 422, None
    if isinstance(exc, Retryable):
        return (429 if exc.rate_limited else 503), _seconds(exc.retry_after)
    if isinstance(exc, _openai_classes("RateLimitError")):
        return 429, _retry_after(getattr(exc, "response", None))
    if isinstance(exc, _openai_classes("InternalServerError")):
        return 503, _retry_after(getattr(exc, "response", None))
    unreachable = (httpx.TransportError, TimeoutError, *_openai_classes("APIConnectionError"))
    if isinstance(exc, unreachable):
        return 503, None  # APITimeoutError is an APIConnectionError
    return 500, None


def _openai_classes(name: str) -> tuple[type[BaseException], ...]:
    """``(openai.<name>,)`` when the ``openai`` package is loaded, else ``()`` (no instance
    of its classes can exist then, and ``isinstance(x, ())`` is False)."""
    cls = getattr(sys.modules.get("openai"), name, None)
    return (cls,) if isinstance(cls, type) and issubclass(cls, BaseException) else ()


def error_response(exc: BaseException) -> JSONResponse:
    """The ``{"error": {"type", "message"}}`` answer for ``exc``."""
    status, retry_after = fault_status(exc)
    headers = dict(exc.headers) if isinstance(exc, RequestRejected) else {}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    kind = error_kind(exc)
    return error_json(status, kind, str(exc) or kind, headers=headers)


def error_kind(exc: BaseException) -> str:
    """The error body's ``type``: the mistake's kind, else the exception's class name."""
    if isinstance(exc, RequestRejected | UserMistake):
        return exc.kind
    return type(exc).__name__


def error_json(
    status: int, kind: str, message: str, *, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error answer with the protocol's body."""
    from starlette.responses import JSONResponse

    body = ErrorBody(error=ErrorDetail(type=kind, message=message))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _seconds(value: float | None) -> str | None:
    if value is None or value != value or value < 0:
        return None
    return str(math.ceil(value))


def _retry_after(response: Any) -> str | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if headers.get("retry-after-ms"):
        try:
            return _seconds(float(headers["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    return value.strip() if value else None
