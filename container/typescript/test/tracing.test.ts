import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { createContainer, type Container } from "../src/app.js";
import { optimize, Registry, type Target } from "../src/target.js";
import { tracingFromEnv } from "../src/tracing.js";

interface Received {
  headers: IncomingMessage["headers"];
  body: {
    resourceSpans: {
      resource: { attributes: { key: string; value: { stringValue: string } }[] };
      scopeSpans: { scope: { name: string }; spans: Record<string, any>[] }[];
    }[];
  };
}

/** A stand-in OTLP/HTTP receiver: keeps every POST /v1/traces it gets. */
async function receiver(): Promise<{ server: Server; url: string; got: Received[] }> {
  const got: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") got.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      res.writeHead(req.url === "/v1/traces" ? 200 : 404, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got };
}

function attributes(span: Record<string, any>): Record<string, unknown> {
  return Object.fromEntries(span["attributes"].map((a: any) => [a.key, a.value.stringValue ?? a.value.doubleValue]));
}

const seen: (string | null)[] = [];
const registry = new Registry();
optimize({ id: "echo", baseline: "Say nothing.", registry }, (task, candidate) => {
  seen.push(candidate.traceparent);
  if (task.name === "crash") throw new TypeError("no such field");
  return candidate.text.includes("echo") ? String(task.input["input"]) : "unknown";
});
const target: Target = registry.get("echo");
const ROWS = [
  { name: "a", input: "alpha", expected: "alpha" },
  { name: "crash", input: "x", expected: "x" },
];
const FOLDER = mkdtempSync(join(tmpdir(), "gepa-tracing-"));
const DATASET = join(FOLDER, "rows.jsonl");
const SPLITS = join(FOLDER, "splits.json");
writeFileSync(DATASET, ROWS.map((r) => JSON.stringify(r)).join("\n"));
writeFileSync(SPLITS, JSON.stringify({ train: ["a"], val: [], holdout: ["crash"] }));

describe("rollout spans", () => {
  let otlp: Awaited<ReturnType<typeof receiver>>;
  let container: Container;
  let url: string;

  before(async () => {
    otlp = await receiver();
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url + "/",
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=s%20ecret,x-team=gepa",
      OTEL_BSP_SCHEDULE_DELAY: "60000", // only close() exports: the test sees one batch
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test,service.name=ignored",
    };
    container = await createContainer(target, { dataset: DATASET, splits: SPLITS, tracer: tracingFromEnv(env), log: () => {} });
    url = await container.listen();
  });

  after(async () => {
    await new Promise((resolve) => otlp.server.close(resolve));
  });

  test("one span per rollout, named and attributed as the Python SDK's, exported on close", async () => {
    const post = (seed: string) =>
      fetch(`${url}/rollout`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ run_id: "run-1", candidate_id: "cand-1", candidate: { system_prompt: "echo it" }, seed }),
      });
    const ok = await post("a");
    const crashed = await post("crash");
    assert.equal(ok.status, 200);
    assert.equal(crashed.status, 500);
    const events: Record<string, string>[] = ((await ok.json()) as any).trace.events;
    assert.equal(otlp.got.length, 0); // batched: nothing sent before the delay or close
    await container.close();

    assert.equal(otlp.got.length, 1);
    const { headers, body } = otlp.got[0]!;
    assert.equal(headers["content-type"], "application/json");
    assert.equal(headers["x-api-key"], "s ecret");
    assert.equal(headers["x-team"], "gepa");
    const [resourceSpans] = body.resourceSpans;
    const resource = Object.fromEntries(resourceSpans!.resource.attributes.map((a) => [a.key, a.value.stringValue]));
    assert.equal(resource["service.name"], "gepa-container");
    assert.equal(resource["deployment.environment"], "test");
    const [scope] = resourceSpans!.scopeSpans;
    assert.equal(scope!.scope.name, "gepa-runtime.container");
    const [good, bad] = scope!.spans;
    assert.equal(good!["name"], "optimize:echo");
    assert.deepEqual(attributes(good!), {
      "gepa.target_id": "echo",
      "gepa.run_id": "run-1",
      "gepa.candidate_id": "cand-1",
      "gepa.seed": "a",
      "gepa.split": "train",
      "gepa.reward": 1,
    });
    assert.match(good!["traceId"], /^[0-9a-f]{32}$/);
    assert.match(good!["spanId"], /^[0-9a-f]{16}$/);
    assert.ok(BigInt(good!["endTimeUnixNano"]) >= BigInt(good!["startTimeUnixNano"]));
    assert.equal(good!["status"].code, 0);
    // The rollout's trace names the span; the agent saw it as its traceparent.
    assert.deepEqual(events.at(-1), { type: "otel_span", name: "optimize:echo", trace_id: good!["traceId"], span_id: good!["spanId"] });
    assert.equal(seen[0], `00-${good!["traceId"]}-${good!["spanId"]}-01`);
    // A rollout that throws: status ERROR, an exception event, no reward.
    assert.equal(bad!["name"], "optimize:echo");
    assert.equal(attributes(bad!)["gepa.reward"], undefined);
    assert.equal(attributes(bad!)["gepa.split"], "holdout");
    assert.deepEqual(bad!["status"], { code: 2, message: "TypeError: no such field" });
    assert.equal(bad!["events"][0].name, "exception");
    assert.equal(attributes(bad!["events"][0])["exception.type"], "TypeError");
  });
});

describe("tracing settings", () => {
  test("no endpoint, no tracer: nothing is recorded", () => {
    assert.equal(tracingFromEnv({}), null);
  });

  test("the traces endpoint is taken as given, the general one gets /v1/traces", () => {
    const both = tracingFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/custom", OTEL_EXPORTER_OTLP_ENDPOINT: "http://g:2" });
    assert.equal(both?.settings.endpoint, "http://t:1/custom");
    assert.equal(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://g:2" })?.settings.endpoint, "http://g:2/v1/traces");
    const warned: string[] = [];
    const tuned = tracingFromEnv(
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://g:2", OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "250", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "7" },
      (line) => warned.push(line),
    );
    assert.equal(tuned?.settings.timeoutMs, 250);
    assert.equal(tuned?.settings.maxBatchSize, 7);
    assert.match(warned[0]!, /OTEL_EXPORTER_OTLP_PROTOCOL=grpc: the TypeScript SDK exports rollout spans as http\/json/);
  });

  test("a receiver that is down costs a warning, not the rollout", async () => {
    const warned: string[] = [];
    const tracer = tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_EXPORTER_OTLP_TIMEOUT: "2000" }, (l) => warned.push(l));
    const container = await createContainer(target, { dataset: DATASET, splits: SPLITS, tracer, log: () => {} });
    const base = await container.listen();
    const answer = await fetch(`${base}/rollout`, { method: "POST", body: JSON.stringify({ candidate: { system_prompt: "echo" }, seed: "a" }) });
    assert.equal(answer.status, 200);
    await container.close();
    assert.equal(warned.length, 1);
    assert.match(warned[0]!, /could not export 1 rollout span\(s\) to http:\/\/127\.0\.0\.1:9\/v1\/traces/);
  });
});
