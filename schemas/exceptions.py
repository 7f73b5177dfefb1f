"""The one exception tree of gepa-runtime.

Three kinds of error are kept apart (as in pydantic-ai): bad configuration by the user
(``UserError``), faults while a run executes (everything under ``GepaError`` else), and
control-flow signals that are not failures (``BudgetExhausted``).

    GepaError
    ├── UserError                 bad input or configuration; the message says what to fix
    │   ├── RunLeased             another live process is executing the run (its lease)
    │   └── ActionRefused         a person's action on a run: unknown id, wrong state, bad body
    ├── ContainerError            talking to a task container went wrong
    │   ├── RolloutFailed         a rollout failed after its retries (infrastructure fault)
    │   ├── ProtocolViolation     the peer broke gepa-container/1 (bad body, 4xx misuse)
    │   │   └── InvalidRollout    a 200 whose body cannot be scored: one errored rollout
    │   └── ContainerUnavailable  no container URL passes its health check
    ├── BudgetExhausted           a budget was reached: stop cleanly (a signal, not a failure)
    ├── WorkspaceError            the SQLite store or the run folder cannot be used
    │   └── StoreUnreachable      the store's server stayed out of reach past the outage limit
    ├── ProposerError             the reflection model could not produce a candidate
    │   └── ProposalRejected      a proposal failed a guard (cut off, empty, unchanged, ...)
    └── Retryable                 raised by a container target: "try again later" (429/503)
"""

from __future__ import annotations

from schemas.usage import ModelUsage

__all__ = [
    "ActionRefused",
    "BudgetExhausted",
    "ContainerError",
    "ContainerUnavailable",
    "GepaError",
    "InvalidRollout",
    "PromptTooLong",
    "ProposalRejected",
    "ProposerError",
    "ProtocolViolation",
    "Retryable",
    "RolloutFailed",
    "RunLeased",
    "StoreUnreachable",
    "UserError",
    "WorkspaceError",
]


class GepaError(Exception):
    """Base of every error raised on purpose by gepa-runtime."""


class UserError(GepaError):
    """Bad configuration or input. The message names the field and the fix."""


class RunLeased(UserError):
    """Another live process holds the run's lease (or took it over from this one).

    The run itself is left as it is: the process that holds the lease owns its status.
    """


class ActionRefused(UserError):
    """A person's action on a run (pause, reject, pin, note, stop) that cannot be recorded.

    ``kind`` says why, as the REST API answers it: ``"unknown"`` (no such run or candidate:
    404), ``"conflict"`` (it does not fit the run's state, e.g. pausing a finished run: 409),
    ``"invalid"`` (a missing or malformed field: 422). The message names the fix.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ContainerError(GepaError):
    """A task container could not be used as the protocol requires."""


class RolloutFailed(ContainerError):
    """A rollout still failed after its retries; it is recorded as an error, never scored.

    ``reason`` says what the last attempt met, so the run can name the fix: ``"timeout"``
    (no answer within ``timeout_s`` seconds: raise ``--rollout-timeout``), ``"status"``
    (429/5xx, see ``status``), ``"connection"`` (refused or dropped) or ``"rate_limit"``
    (nothing but 429s for longer than the wait allowed). ``last`` describes that answer.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 1,
        status: int | None = None,
        reason: str = "status",
        timeout_s: float | None = None,
        last: str = "",
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.reason = reason
        self.timeout_s = timeout_s
        self.last = last


class ProtocolViolation(ContainerError):
    """The peer answered outside gepa-container/1 (a 4xx misuse or a malformed body)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class InvalidRollout(ProtocolViolation):
    """A ``200`` answer that cannot be scored: not a rollout, a reward that is not a finite
    number in the program's range, a negative cost, or a body over the size cap.

    Not a failed run and not an infrastructure fault: the rollout is recorded as one error
    with this message, excluded from every mean, and not retried (the container would
    answer the same). ``attempts`` counts the tries that led to it.
    """

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        super().__init__(message, status=200)
        self.attempts = attempts


class ContainerUnavailable(ContainerError):
    """No configured container URL answers its health check."""


class BudgetExhausted(GepaError):
    """A budget (metric calls or cost) is reached. A signal: the run finishes cleanly."""


class WorkspaceError(GepaError):
    """The workspace database or run folder cannot be opened, read or written."""


class StoreUnreachable(WorkspaceError):
    """The store's server (PostgreSQL) could not be reached for longer than the outage limit.

    Nothing committed is lost; the run resumes by id once the server answers again.
    """


class ProposerError(GepaError):
    """The reflection model (or the proposer command) failed to produce a usable candidate.

    ``reason`` is a short machine-readable tag of what went wrong: ``"error"`` for a failure
    of the model or the command, a guard's tag (``"cut_off"``, ``"unchanged"``, ...) for a
    ``ProposalRejected``. ``usage`` is what the failed proposal spent: the proposer that
    raises it books it (a refusal is never free in the run's accounts); zero until then.
    """

    reason: str = "error"
    usage: ModelUsage

    def __init__(self, message: str = "", *, usage: ModelUsage | None = None) -> None:
        super().__init__(message)
        self.usage = usage if usage is not None else ModelUsage()


class ProposalRejected(ProposerError):
    """A proposal failed a guard; ``reason`` is a short machine-readable tag.

    ``content_hash`` is the refused text's content hash where the guard computed it: for a
    ``duplicate``, the existing candidate's (so the search can tell a repeat of a sibling's
    edit from an answer that went back to an older text).
    """

    content_hash: str | None

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        usage: ModelUsage | None = None,
        content_hash: str | None = None,
    ) -> None:
        super().__init__(f"{reason}: {message}", usage=usage)
        self.reason = reason
        self.content_hash = content_hash


class PromptTooLong(ProposalRejected):
    """A proposal exceeds the configured length cap."""

    def __init__(self, message: str) -> None:
        super().__init__("too_long", message)


class Retryable(GepaError):
    """Raised inside a container target to say "infrastructure fault, try again".

    The container answers 503 (or 429 when ``rate_limited``) with ``Retry-After`` when
    ``retry_after`` is known; the optimizer retries and never scores it.
    """

    def __init__(
        self,
        message: str = "retry later",
        *,
        retry_after: float | None = None,
        rate_limited: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.rate_limited = rate_limited
