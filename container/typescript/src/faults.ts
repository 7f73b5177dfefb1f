/**
 * How a failure becomes an HTTP answer: the status code, `Retry-After` and the error body
 * `{"error": {"type", "message"}}`, as the Python SDK maps them (container/faults.py).
 *
 * - `RequestRejected`: its own 4xx (unknown seed, missing component, bad body, token).
 * - `UserError` (a row that cannot be rendered or scored, a bad return type): 422, typed by
 *   the `UserMistake`'s kind. It is deterministic: retrying would only re-run the agent and
 *   end in the same mistake.
 * - `Retryable`: 429 when `rateLimited`, else 503, with `Retry-After` when known.
 * - Provider faults, recognized by shape so that no client library is needed: an error with
 *   `status`/`statusCode` 429 (OpenAI's `RateLimitError`, the Vercel AI SDK's `APICallError`)
 *   -> 429; 5xx -> 503, with `Retry-After` from its headers; connection errors and timeouts
 *   (`APIConnectionError`, fetch's `TypeError: fetch failed` with a socket error code,
 *   `TimeoutError`) -> 503. Causes (`cause`, `lastError`) are followed.
 * - Anything else: 500 naming the error, never a made-up reward.
 */

import { RequestRejected, Retryable, UserError, UserMistake } from "./errors.js";
import type { ErrorBody } from "./protocol.js";

/** What to answer: status, error body and headers. */
export interface Fault {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
}

const CONNECTION_NAMES = ["APIConnectionError", "APIConnectionTimeoutError", "TimeoutError", "ConnectTimeoutError"];
const CONNECTION_CODES = [
  "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH",
  "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CLOSED",
];

/** `[status, Retry-After or null]` for an error thrown while serving a rollout. */
export function faultStatus(err: unknown): [number, string | null] {
  if (err instanceof RequestRejected) return [err.status, null];
  if (err instanceof UserError) return [422, null];
  if (err instanceof Retryable) return [err.rateLimited ? 429 : 503, seconds(err.retryAfter)];
  return providerStatus(err, 0) ?? [500, null];
}

/** The answer for `err`. */
export function faultOf(err: unknown): Fault {
  const [status, retryAfter] = faultStatus(err);
  const headers: Record<string, string> = err instanceof RequestRejected ? { ...err.headers } : {};
  if (retryAfter !== null) headers["Retry-After"] = retryAfter;
  const kind = errorKind(err);
  const message = err instanceof Error ? err.message : String(err);
  return { status, body: errorBody(kind, message || kind), headers };
}

/** The protocol's error body. */
export function errorBody(type: string, message: string): ErrorBody {
  return { error: { type, message } };
}

/** The error body's `type`: the mistake's kind, else the error's class name. */
export function errorKind(err: unknown): string {
  if (err instanceof RequestRejected || err instanceof UserMistake) return err.kind;
  if (err instanceof Error) return err.name && err.name !== "Error" ? err.name : (err.constructor?.name ?? "Error");
  return typeof err === "object" && err !== null ? (err.constructor?.name ?? "Error") : "Error";
}

function providerStatus(err: unknown, depth: number): [number, string | null] | null {
  if (typeof err !== "object" || err === null || depth > 4) return null;
  const e = err as Record<string, unknown>;
  const status = typeof e["status"] === "number" ? e["status"] : e["statusCode"];
  const headers = e["headers"] ?? e["responseHeaders"];
  if (status === 429) return [429, retryAfter(headers)];
  if (typeof status === "number" && status >= 500 && status <= 599) return [503, retryAfter(headers)];
  if (typeof e["name"] === "string" && CONNECTION_NAMES.includes(e["name"])) return [503, null];
  if (typeof e["code"] === "string" && CONNECTION_CODES.includes(e["code"])) return [503, null];
  return providerStatus(e["cause"], depth + 1) ?? providerStatus(e["lastError"], depth + 1);
}

function seconds(value: number | null): string | null {
  if (value === null || Number.isNaN(value) || value < 0) return null;
  return String(Math.ceil(value));
}

function header(headers: unknown, name: string): string | null {
  if (typeof headers !== "object" || headers === null) return null;
  const get = (headers as { get?: unknown }).get;
  if (typeof get === "function") return (get.call(headers, name) as string | null) ?? null;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name && typeof value === "string") return value;
  }
  return null;
}

function retryAfter(headers: unknown): string | null {
  const ms = header(headers, "retry-after-ms");
  if (ms && !Number.isNaN(Number(ms))) return seconds(Number(ms) / 1000);
  const value = header(headers, "retry-after");
  return value ? value.trim() : null;
}
