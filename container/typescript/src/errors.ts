/**
 * The one error tree of the TypeScript SDK, as in the Python SDK (schemas/exceptions.py).
 *
 *     GepaContainerError
 *     ├── UserError          a mistake the user must fix; the message names the field and the fix
 *     │   ├── UserMistake    one with a kind (`MissingLabel`, ...): the error body's `type`
 *     │   └── TemplateError  a prompt template that cannot be built or rendered
 *     ├── Retryable          thrown by a target: "infrastructure fault, try again" (429/503)
 *     └── RequestRejected    the request is the caller's fault: answered with its 4xx status
 *
 * A UserError thrown while serving a rollout (a row that cannot be rendered or scored, a
 * target returning the wrong type) is answered 422: it is deterministic, so retrying it would
 * only re-run the agent. Anything else a target throws that is not a provider fault is a 500.
 * Which mistake gives which status: docs/container-errors.md in the repository.
 */

/** Base of every error the SDK throws on purpose. */
export class GepaContainerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad configuration or input. The message names the field and the fix. */
export class UserError extends GepaContainerError {}

/**
 * A mistake every retry would repeat, answered 422 with `kind` as the error type. The SDK's
 * kinds are `TemplateMismatch`, `MissingLabel`, `BadLabel`, `BadTargetResult`, `BadScore` and
 * `CandidateMisuse`; throw one with your own kind for a row your target or verifier cannot
 * work on: `throw new UserMistake("MissingRubric", "seed 'x' has no rubric; add one")`.
 */
export class UserMistake extends UserError {
  readonly kind: string;

  constructor(kind: string, message: string) {
    super(message);
    this.kind = kind;
  }
}

/** A prompt template that cannot be built or rendered. */
export class TemplateError extends UserError {}

/** Options of {@link Retryable}. */
export interface RetryableOptions {
  /** Seconds the optimizer should wait, sent as `Retry-After` (rounded up). */
  retryAfter?: number | null;
  /** `true` answers 429 (rate limited), otherwise 503. */
  rateLimited?: boolean;
}

/**
 * Throw inside a target to say "infrastructure fault, try again later": the container answers
 * 503 (or 429 when `rateLimited`) with `Retry-After` when known; the optimizer retries and
 * never scores it.
 */
export class Retryable extends GepaContainerError {
  readonly retryAfter: number | null;
  readonly rateLimited: boolean;

  constructor(message = "retry later", options: RetryableOptions = {}) {
    super(message);
    this.retryAfter = options.retryAfter ?? null;
    this.rateLimited = options.rateLimited ?? false;
  }
}

/** The request is the caller's fault (or not authorized): answered with a 4xx, never retried. */
export class RequestRejected extends GepaContainerError {
  readonly status: number;
  /** The error body's `type`, e.g. `UnknownSeed`. */
  readonly kind: string;
  readonly headers: Record<string, string>;

  constructor(status: number, kind: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.headers = headers;
  }
}
