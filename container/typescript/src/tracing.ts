/**
 * OpenTelemetry spans around rollouts, as the Python SDK's `container/tracing.py` records them:
 * one span named `optimize:<target id>` per `POST /rollout`, with the attributes
 * `gepa.run_id`, `gepa.candidate_id`, `gepa.seed`, `gepa.split`, `gepa.target_id` and, once
 * scored, `gepa.reward`; a rollout that throws ends its span with status ERROR and an
 * `exception` event. The span's ids go into the rollout's trace as an `otel_span` event, so the
 * optimizer's console shows which trace each trial ran in.
 *
 * No dependency: spans are exported as OTLP/HTTP JSON with `fetch`, in batches, where the
 * standard variables point. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the URL as given, else
 * `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; `OTEL_EXPORTER_OTLP[_TRACES]_HEADERS`
 * (`k=v,k2=v2`) and `_TIMEOUT` (ms), and `OTEL_BSP_SCHEDULE_DELAY`,
 * `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` and `OTEL_BSP_MAX_QUEUE_SIZE` are read as the OpenTelemetry
 * SDKs read them. Without an endpoint, no span is recorded and no event is added. The agent
 * gets the span as `candidate.traceparent` (W3C), to parent spans of its own or to pass on as
 * the `traceparent` header of its model calls.
 */

import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";

import type { RolloutRequest } from "./protocol.js";

const SCOPE = "gepa-runtime.container"; // the Python SDK's tracer name
const SERVICE = "gepa-container";
const SPAN_KIND_INTERNAL = 1;
const STATUS_ERROR = 2;

/** Where and how spans are exported (see {@link tracingFromEnv}). */
export interface ExportSettings {
  /** The OTLP/HTTP traces URL (`.../v1/traces`). */
  endpoint: string;
  headers: Record<string, string>;
  timeoutMs: number;
  /** Milliseconds between exports of what is queued. */
  scheduleDelayMs: number;
  maxBatchSize: number;
  /** Spans beyond this many waiting are dropped (counted in the next warning). */
  maxQueueSize: number;
  /** Extra resource attributes (`OTEL_RESOURCE_ATTRIBUTES`); `service.name` stays ours. */
  resource: Record<string, string>;
}

type Attribute = { key: string; value: { stringValue: string } | { doubleValue: number } };

interface SpanData {
  traceId: string;
  spanId: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attribute[];
  events: { name: string; timeUnixNano: string; attributes: Attribute[] }[];
  status: { code: number; message?: string };
}

/** The trace event of one span, its ids in the W3C hex form backends display. */
export function spanEvent(name: string, traceId: string, spanId: string): Record<string, string> {
  return { type: "otel_span", name, trace_id: traceId, span_id: spanId };
}

/** The span of one rollout: its ids, then `finish(reward)` or `fail(error)`. */
export class RolloutSpan {
  readonly traceId = randomBytes(16).toString("hex");
  readonly spanId = randomBytes(8).toString("hex");
  readonly #started = nowNanos();
  readonly #attributes: Attribute[];
  #done = false;

  constructor(
    readonly name: string,
    attributes: Record<string, string>,
    private readonly tracer: RolloutTracer,
  ) {
    this.#attributes = Object.entries(attributes).map(([key, value]) => stringAttribute(key, value));
  }

  /** `00-<trace id>-<span id>-01`: this span as a W3C `traceparent`. */
  get traceparent(): string {
    return `00-${this.traceId}-${this.spanId}-01`;
  }

  /** End it with `gepa.reward`; the trace event that names it. */
  finish(reward: number): Record<string, string> {
    this.#end([...this.#attributes, { key: "gepa.reward", value: { doubleValue: reward } }], [], { code: 0 });
    return spanEvent(this.name, this.traceId, this.spanId);
  }

  /** End it with status ERROR and an `exception` event, as a span a thrown error left. */
  fail(err: unknown): void {
    const type = err instanceof Error ? err.name : typeof err;
    const message = err instanceof Error ? err.message : String(err);
    const exception = [
      stringAttribute("exception.type", type),
      stringAttribute("exception.message", message),
      stringAttribute("exception.stacktrace", err instanceof Error ? (err.stack ?? "") : ""),
    ];
    const event = { name: "exception", timeUnixNano: nowNanos(), attributes: exception };
    this.#end(this.#attributes, [event], { code: STATUS_ERROR, message: `${type}: ${message}` });
  }

  #end(attributes: Attribute[], events: SpanData["events"], status: SpanData["status"]): void {
    if (this.#done) return;
    this.#done = true;
    this.tracer.record({
      traceId: this.traceId,
      spanId: this.spanId,
      name: this.name,
      kind: SPAN_KIND_INTERNAL,
      startTimeUnixNano: this.#started,
      endTimeUnixNano: nowNanos(),
      attributes,
      events,
      status,
    });
  }
}

/** Starts rollout spans and exports them, batched, as OTLP/HTTP JSON. */
export class RolloutTracer {
  #queue: SpanData[] = [];
  #dropped = 0;
  #failures = 0;
  #timer: NodeJS.Timeout | null = null;
  #sending: Promise<void> = Promise.resolve();

  constructor(
    readonly settings: ExportSettings,
    private readonly warn: (line: string) => void = (line) => process.stderr.write(line + "\n"),
  ) {}

  /** The span of one rollout of `targetId` (the Python SDK's name and attributes). */
  start(targetId: string, request: RolloutRequest, split: string | null): RolloutSpan {
    return new RolloutSpan(`optimize:${targetId}`, {
      "gepa.target_id": targetId,
      "gepa.run_id": request.run_id || "",
      "gepa.candidate_id": request.candidate_id || "",
      "gepa.seed": request.seed,
      "gepa.split": split ?? "",
    }, this);
  }

  /** Queue an ended span; a full batch goes at once, the rest after the schedule delay. */
  record(span: SpanData): void {
    if (this.#queue.length >= this.settings.maxQueueSize) {
      this.#dropped += 1;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= this.settings.maxBatchSize) void this.flush();
    else if (this.#timer === null) {
      this.#timer = setTimeout(() => void this.flush(), this.settings.scheduleDelayMs);
      this.#timer.unref(); // a pending export never keeps the process alive
    }
  }

  /** Export everything queued; resolves once sent (or given up on: a warning says so). */
  flush(): Promise<void> {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.settings.maxBatchSize);
      this.#sending = this.#sending.then(() => this.#send(batch));
    }
    return this.#sending;
  }

  async #send(spans: SpanData[]): Promise<void> {
    const body = JSON.stringify(this.#request(spans));
    try {
      const response = await fetch(this.settings.endpoint, {
        method: "POST",
        headers: { ...this.settings.headers, "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
      await response.arrayBuffer(); // read it, so the connection is free again
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
    } catch (err) {
      this.#failures += 1;
      if (this.#failures === 1 || this.#failures % 100 === 0) {
        this.warn(`warning: could not export ${spans.length} rollout span(s) to ${this.settings.endpoint} ` +
          `(${(err as Error).message}; ${this.#failures} export(s) failed so far); the rollouts are not affected`);
      }
    }
  }

  #request(spans: SpanData[]): unknown {
    const resource = { ...this.settings.resource, "service.name": SERVICE, "telemetry.sdk.language": "nodejs" };
    if (this.#dropped > 0) {
      this.warn(`warning: dropped ${this.#dropped} rollout span(s): more than OTEL_BSP_MAX_QUEUE_SIZE waited for export`);
      this.#dropped = 0;
    }
    return {
      resourceSpans: [
        {
          resource: { attributes: Object.entries(resource).map(([k, v]) => stringAttribute(k, v)) },
          scopeSpans: [{ scope: { name: SCOPE }, spans }],
        },
      ],
    };
  }
}

/**
 * A tracer exporting where the standard variables point, or `null` (no endpoint set: tracing
 * off). `warn` hears about settings the SDK does not follow (a protocol other than http/json).
 */
export function tracingFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  warn: (line: string) => void = (line) => process.stderr.write(line + "\n"),
): RolloutTracer | null {
  const pick = (name: string): string | undefined => env[`OTEL_EXPORTER_OTLP_TRACES_${name}`] || env[`OTEL_EXPORTER_OTLP_${name}`];
  let endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"];
  if (!endpoint) {
    const base = env["OTEL_EXPORTER_OTLP_ENDPOINT"];
    if (!base) return null;
    endpoint = base.replace(/\/+$/, "") + "/v1/traces";
  }
  const protocol = pick("PROTOCOL");
  if (protocol && protocol !== "http/json") {
    warn(`warning: OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: the TypeScript SDK exports rollout spans as http/json`);
  }
  return new RolloutTracer({
    endpoint,
    headers: keyValues(pick("HEADERS")),
    timeoutMs: positive(pick("TIMEOUT"), 10_000),
    scheduleDelayMs: positive(env["OTEL_BSP_SCHEDULE_DELAY"], 5_000),
    maxBatchSize: positive(env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"], 512),
    maxQueueSize: positive(env["OTEL_BSP_MAX_QUEUE_SIZE"], 2_048),
    resource: keyValues(env["OTEL_RESOURCE_ATTRIBUTES"]),
  }, warn);
}

/** `k=v,k2=v2` (values percent-decoded), as the OTLP headers and resource variables are written. */
function keyValues(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (text ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    try {
      out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      continue; // a malformed escape: skipped, as the OpenTelemetry SDKs skip it
    }
  }
  return out;
}

function positive(text: string | undefined, fallback: number): number {
  const value = Number(text);
  return text && Number.isFinite(value) && value > 0 ? value : fallback;
}

function stringAttribute(key: string, value: string): Attribute {
  return { key, value: { stringValue: value } };
}

/** Unix time in nanoseconds, as OTLP wants it (monotonic within the process). */
function nowNanos(): string {
  const origin = BigInt(Math.round(performance.timeOrigin * 1e3)) * 1000n; // µs are exact in a double
  return (origin + BigInt(Math.round(performance.now() * 1e6))).toString();
}
