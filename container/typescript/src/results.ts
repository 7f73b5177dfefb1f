/**
 * What a target returns ({@link AgentResult}) and what a verifier returns ({@link Score}).
 *
 * A target may return an `AgentResult`, a string (the output) or a plain object with
 * AgentResult fields; a verifier a `Score`, a `{score, feedback}` object, a `[score, feedback]`
 * pair, a number in [0, 1] or a boolean. Anything else is a `UserMistake` (`BadTargetResult`,
 * `BadScore`) that names the type that came back and the shapes allowed: the container
 * answers 422, never a retried 5xx.
 */

import { UserError, UserMistake } from "./errors.js";
import { isPlainObject, pyRepr, typeName } from "./python.js";

/** Token counts of one target call. */
export interface AgentUsage {
  inputTokens?: number;
  outputTokens?: number;
  /** Of `inputTokens`, those the provider served from its prompt cache (billed at a discount). */
  cachedInputTokens?: number;
}

/** What happened inside a rollout, for the reflection model to read. */
export interface AgentTrace {
  messages?: Record<string, unknown>[];
  toolCalls?: Record<string, unknown>[];
  events?: Record<string, unknown>[];
}

/** The fields of an {@link AgentResult}; only `output` is required. */
export interface AgentResultInit {
  output: unknown;
  traceId?: string | null;
  /** Measured by the SDK when left out. */
  latencyMs?: number | null;
  costUsd?: number | null;
  usage?: AgentUsage | null;
  /** The student model that answered: the optimizer prices its tokens. */
  model?: string | null;
  metadata?: Record<string, unknown> | null;
  trace?: AgentTrace | null;
  /** A shortcut appended to `trace.messages`. */
  messages?: Record<string, unknown>[] | null;
}

const RESULT_FIELDS = ["output", "traceId", "latencyMs", "costUsd", "usage", "model", "metadata", "trace", "messages"];

/** The outcome of one target call. */
export class AgentResult {
  readonly output: unknown;
  readonly traceId: string | null;
  readonly latencyMs: number | null;
  readonly costUsd: number | null;
  readonly usage: Required<AgentUsage>;
  readonly model: string | null;
  readonly metadata: Record<string, unknown> | null;
  readonly trace: Required<AgentTrace>;
  readonly messages: Record<string, unknown>[];

  constructor(init: AgentResultInit) {
    const problems = resultProblems(init);
    if (problems.length > 0) throw new UserError(`invalid AgentResult: ${problems.join("; ")}`);
    this.output = init.output === undefined ? null : init.output;
    this.traceId = init.traceId ?? null;
    this.latencyMs = init.latencyMs ?? null;
    this.costUsd = init.costUsd ?? null;
    this.usage = {
      inputTokens: init.usage?.inputTokens ?? 0,
      outputTokens: init.usage?.outputTokens ?? 0,
      cachedInputTokens: init.usage?.cachedInputTokens ?? 0,
    };
    this.model = init.model ?? null;
    this.metadata = init.metadata ?? null;
    this.trace = {
      messages: init.trace?.messages ?? [],
      toolCalls: init.trace?.toolCalls ?? [],
      events: init.trace?.events ?? [],
    };
    this.messages = init.messages ?? [];
  }
}

/** A verifier's judgement: `score` in [0, 1] and actionable `feedback`. */
export class Score {
  readonly score: number;
  readonly feedback: string;

  constructor(score: number, feedback = "") {
    if (typeof score !== "number" || !Number.isFinite(score) || score < 0 || score > 1) {
      throw new UserError(`score: must be a finite number in [0, 1], got ${String(score)}`);
    }
    this.score = score;
    this.feedback = String(feedback);
  }
}

/** An `AgentResult` from what a target returned: the class itself, a string or a plain object. */
export function coerceResult(value: unknown, targetId: string): AgentResult {
  if (value instanceof AgentResult) return value;
  if (typeof value === "string") return new AgentResult({ output: value });
  if (isPlainObject(value)) {
    const problems = resultProblems(value);
    if (problems.length > 0) {
      throw new UserMistake(
        "BadTargetResult",
        `target ${pyRepr(targetId)} returned an object that is not a valid AgentResult: ${problems.join("; ")}; ` +
          "return AgentResult fields (at least 'output')",
      );
    }
    return new AgentResult(value as unknown as AgentResultInit);
  }
  throw new UserMistake(
    "BadTargetResult",
    `target ${pyRepr(targetId)} returned ${typeName(value)}; return an AgentResult, a string, ` +
      "or a plain object with AgentResult fields (at least 'output')",
  );
}

/** A `Score` from what a verifier returned. */
export function coerceScore(value: unknown, verifier: string): Score {
  if (value instanceof Score) return value;
  if (Array.isArray(value) && value.length === 2 && typeof value[0] !== "number") {
    throw new UserMistake(
      "BadScore",
      `verifier ${pyRepr(verifier)} returned a score of type ${typeName(value[0])}; a score must be a number in [0, 1]`,
    );
  }
  try {
    if (isPlainObject(value)) {
      const extra = Object.keys(value).filter((k) => k !== "score" && k !== "feedback");
      if (extra.length > 0) throw new UserError(`${extra[0]}: unknown field; a score has score and feedback`);
      if (typeof value["score"] !== "number") throw new UserError("score: must be a number");
      if (value["feedback"] !== undefined && typeof value["feedback"] !== "string") {
        throw new UserError("feedback: must be a string");
      }
      return new Score(value["score"], (value["feedback"] as string | undefined) ?? "");
    }
    if (Array.isArray(value) && value.length === 2) return new Score(value[0] as number, String(value[1]));
    if (typeof value === "number") return new Score(value);
    if (typeof value === "boolean") return new Score(value ? 1 : 0);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    throw new UserMistake(
      "BadScore",
      `verifier ${pyRepr(verifier)} returned an invalid score: ${err.message}; return a finite score in [0, 1]`,
    );
  }
  throw new UserMistake(
    "BadScore",
    `verifier ${pyRepr(verifier)} returned ${typeName(value)}; return a Score, ` +
      "a [score, feedback] pair, or a number in [0, 1]",
  );
}

function resultProblems(init: object): string[] {
  const v = init as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(v)) {
    if (!RESULT_FIELDS.includes(key)) {
      const tokens = ["inputTokens", "outputTokens", "cachedInputTokens"].includes(key);
      const hint = tokens ? " (token counts go in usage: {inputTokens, outputTokens, cachedInputTokens})" : "";
      problems.push(`${key}: unknown field${hint}; allowed: ${RESULT_FIELDS.join(", ")}`);
    }
  }
  if (!("output" in v)) problems.push("output: field required");
  if (v["traceId"] != null && typeof v["traceId"] !== "string") problems.push("traceId: must be a string");
  if (v["model"] != null && typeof v["model"] !== "string") problems.push("model: must be a string");
  for (const key of ["latencyMs", "costUsd"]) {
    if (v[key] != null && !nonNegative(v[key])) problems.push(`${key}: must be a finite number >= 0`);
  }
  problems.push(...usageProblems(v["usage"]));
  if (v["metadata"] != null && !isPlainObject(v["metadata"])) problems.push("metadata: must be a plain object");
  problems.push(...listProblems("messages", v["messages"]));
  const trace = v["trace"];
  if (trace != null) {
    if (!isPlainObject(trace)) problems.push("trace: must be an object {messages, toolCalls, events}");
    else {
      for (const key of Object.keys(trace)) {
        if (!["messages", "toolCalls", "events"].includes(key)) problems.push(`trace.${key}: unknown field; allowed: messages, toolCalls, events`);
      }
      for (const key of ["messages", "toolCalls", "events"]) problems.push(...listProblems(`trace.${key}`, trace[key]));
    }
  }
  return problems;
}

function usageProblems(usage: unknown): string[] {
  if (usage == null) return [];
  if (!isPlainObject(usage)) return ["usage: must be an object {inputTokens, outputTokens, cachedInputTokens}"];
  const allowed = ["inputTokens", "outputTokens", "cachedInputTokens"];
  const problems = Object.keys(usage)
    .filter((k) => !allowed.includes(k))
    .map((k) => `usage.${k}: unknown field; allowed: ${allowed.join(", ")}`);
  for (const key of allowed) {
    const n = usage[key];
    if (n != null && !(Number.isInteger(n) && (n as number) >= 0)) problems.push(`usage.${key}: must be an integer >= 0`);
  }
  return problems;
}

function listProblems(field: string, value: unknown): string[] {
  if (value == null) return [];
  if (!Array.isArray(value) || !value.every(isPlainObject)) return [`${field}: must be a list of plain objects`];
  return [];
}

function nonNegative(value: unknown): boolean {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}
