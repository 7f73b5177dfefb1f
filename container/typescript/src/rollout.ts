/** Serve one `POST /rollout`: resolve the seed and candidate, run the target, score it. */

import { performance } from "node:perf_hooks";

import { checkRowFits } from "./checks.js";
import { RequestRejected, TemplateError } from "./errors.js";
import type { ServedProgram } from "./program.js";
import type { RolloutRequest, RolloutResponse } from "./protocol.js";
import { pyRepr } from "./python.js";
import { AgentResult, coerceResult } from "./results.js";
import { splitOf } from "./splits.js";
import { Candidate, taskFieldsOf, type Task } from "./task.js";
import type { PromptTemplate } from "./template.js";
import type { RolloutSpan, RolloutTracer } from "./tracing.js";

/**
 * Run and score one rollout; caller faults throw `RequestRejected` (404/422).
 *
 * A row that cannot be rendered (its input lacks a field of the user template) throws
 * `UserMistake` (422) before the target runs: no candidate can fix it. A template candidate
 * whose `demos` component does not parse, or holds a demo whose input does not fit the user
 * template, is not run: it scores 0 with feedback saying why (a broken prompt is the
 * candidate's failure, not an infrastructure fault to retry). With a `tracer`, it all runs in
 * an `optimize:<target id>` span (tracing.ts) whose ids the trace's events name.
 */
export async function runRollout(
  served: ServedProgram,
  request: RolloutRequest,
  tracer: RolloutTracer | null = null,
): Promise<RolloutResponse> {
  const task = resolveTask(served, request);
  const components = resolveComponents(served, request);
  const span = tracer?.start(served.target.id, request, task.split) ?? null;
  let answer: RolloutResponse;
  try {
    answer = await scored(served, request, task, components, span);
  } catch (err) {
    span?.fail(err);
    throw err;
  }
  const event = span?.finish(answer.reward);
  if (event !== undefined && request.return_trace) answer.trace.events.push(event); // for the console's feed
  return answer;
}

async function scored(
  served: ServedProgram,
  request: RolloutRequest,
  task: Task,
  components: Record<string, string>,
  span: RolloutSpan | null,
): Promise<RolloutResponse> {
  checkRowFits(served.target.template, task);
  let template: PromptTemplate | null = null;
  if (served.target.template !== null) {
    try {
      template = served.target.template.withComponents(components);
      template.checkDemos();
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      return response(0, null, err.message, emptyTrace(), usage(null, 0));
    }
  }
  const candidate = new Candidate(components, {
    candidateId: request.candidate_id,
    model: request.policy.model,
    template,
    traceparent: span?.traceparent ?? null,
  });
  const started = performance.now();
  const value = await served.target.fn(task, candidate);
  const measuredMs = performance.now() - started;
  const result = coerceResult(value, served.target.id);
  const score = await served.verifier.score(task, result);
  const trace = request.return_trace ? traceOf(result, task, served.target.template) : emptyTrace();
  return response(score.score, jsonable(result.output), score.feedback, trace, usage(result, measuredMs));
}

function resolveTask(served: ServedProgram, request: RolloutRequest): Task {
  const task = served.dataset.get(request.seed);
  if (task === undefined) {
    throw new RequestRejected(
      404,
      "UnknownSeed",
      `unknown seed ${pyRepr(request.seed)}; program ${pyRepr(served.target.id)} has ` +
        `${served.dataset.size} seeds, listed by GET /program`,
    );
  }
  // a copy: a target that edits its task's input or metadata must not edit the dataset
  return { ...structuredClone({ ...task }), split: splitOf(served.splits, task.name) };
}

function resolveComponents(served: ServedProgram, request: RolloutRequest): Record<string, string> {
  const expected = Object.keys(served.target.baseline);
  const missing = expected.filter((n) => !(n in request.candidate));
  const unknown = Object.keys(request.candidate).filter((n) => !expected.includes(n));
  if (missing.length > 0 || unknown.length > 0) {
    const problems: string[] = [];
    if (missing.length > 0) problems.push(`missing component(s): ${missing.join(", ")}`);
    if (unknown.length > 0) problems.push(`unknown component(s): ${unknown.join(", ")}`);
    throw new RequestRejected(
      422,
      "ComponentMismatch",
      `candidate ${problems.join("; ")}; the program's components are: ${expected.join(", ")}`,
    );
  }
  return Object.fromEntries(expected.map((n) => [n, request.candidate[n]!]));
}

function response(
  reward: number,
  output: unknown,
  feedback: string,
  trace: RolloutResponse["trace"],
  usageBody: RolloutResponse["usage"],
): RolloutResponse {
  return { reward, objectives: { reward }, output, feedback, trace, usage: usageBody, error: null };
}

function usage(result: AgentResult | null, measuredMs: number): RolloutResponse["usage"] {
  return {
    input_tokens: result?.usage.inputTokens ?? 0,
    output_tokens: result?.usage.outputTokens ?? 0,
    cached_input_tokens: result?.usage.cachedInputTokens ?? 0,
    cost_usd: result?.costUsd ?? 0,
    latency_ms: result?.latencyMs ?? measuredMs,
    model: result?.model ?? null,
  };
}

function emptyTrace(): RolloutResponse["trace"] {
  return { messages: [], tool_calls: [], events: [] };
}

/**
 * The seed's input (and, on train seeds only, its label): what MIPRO builds demos from. Under a
 * template, the input is the fields its placeholders name, so a demo made from it renders.
 */
function taskEvent(task: Task, template: PromptTemplate | null): Record<string, unknown> {
  let shown: unknown = task.input;
  if (template !== null) {
    const fields = taskFieldsOf(task);
    shown = Object.fromEntries(template.placeholders.map((name) => [name, fields[name]]));
  }
  const event: Record<string, unknown> = { type: "task", seed: task.name, input: shown };
  if (task.split === "train") event["expected"] = task.expected;
  return event;
}

function traceOf(result: AgentResult, task: Task, template: PromptTemplate | null): RolloutResponse["trace"] {
  const events: unknown[] = [taskEvent(task, template), ...result.trace.events];
  if (result.traceId !== null || (result.metadata !== null && Object.keys(result.metadata).length > 0)) {
    events.push({ type: "agent_result", trace_id: result.traceId, metadata: result.metadata ?? {} });
  }
  return jsonable({
    messages: [...result.trace.messages, ...result.messages],
    tool_calls: result.trace.toolCalls,
    events,
  }) as RolloutResponse["trace"];
}

/** A value that JSON can carry: bigints and other odd values as text, as Python's `fallback=str`. */
function jsonable(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value === undefined ? null : value, (_key, v: unknown) => {
      if (typeof v === "bigint" || typeof v === "symbol" || typeof v === "function") return String(v);
      if (typeof v === "number" && !Number.isFinite(v)) return String(v);
      return v;
    }),
  );
}
