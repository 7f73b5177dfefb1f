import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer as netServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { createContainer, type Container } from "../src/app.js";
import { Retryable } from "../src/errors.js";
import { AgentResult } from "../src/results.js";
import { optimize, Registry, type Target } from "../src/target.js";
import type { Task } from "../src/task.js";
import { PromptTemplate } from "../src/template.js";

const ROWS = [
  { name: "ok", input: "alpha", expected: "alpha" },
  { name: "rate", input: "x", expected: "x" },
  { name: "busy", input: "x", expected: "x" },
  { name: "provider429", input: "x", expected: "x" },
  { name: "provider500", input: "x", expected: "x" },
  { name: "refused", input: "x", expected: "x" },
  { name: "crash", input: "x", expected: "x" },
  { name: "int", input: "x", expected: "x" },
  { name: "nolabel", input: "x" },
];

async function closedPort(): Promise<number> {
  const server = netServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function agent(task: Task, candidate: { text: string; model: string | null }): Promise<unknown> {
  switch (task.name) {
    case "rate":
      throw new Retryable("slow down", { rateLimited: true, retryAfter: 6.2 });
    case "busy":
      throw new Retryable("warming up");
    case "provider429":
      throw Object.assign(new Error("Rate limit reached"), { status: 429, headers: new Headers({ "retry-after-ms": "2500" }) });
    case "provider500":
      throw Object.assign(new Error("upstream"), { statusCode: 502, responseHeaders: { "Retry-After": "9" } });
    case "refused":
      await fetch(`http://127.0.0.1:${await closedPort()}/v1/chat/completions`);
      return "unreachable";
    case "crash":
      throw new TypeError("cannot read property of undefined");
    case "int":
      return 42;
  }
  const output = candidate.text.includes("echo") ? String(task.input["input"]) : "unknown";
  return new AgentResult({ output, usage: { inputTokens: 5, outputTokens: 1 }, costUsd: 0.001, traceId: "t-1", messages: [{ role: "assistant", content: output }] });
}

describe("the HTTP container", () => {
  let container: Container;
  let url: string;
  let template: Container;
  let templateUrl: string;
  const logged: string[] = [];
  let renders = 0;

  before(async () => {
    const root = mkdtempSync(join(tmpdir(), "gepa-app-"));
    writeFileSync(join(root, "rows.jsonl"), ROWS.map((r) => JSON.stringify(r)).join("\n"));
    writeFileSync(join(root, "splits.json"), JSON.stringify({ train: ROWS.map((r) => r.name) }));
    writeFileSync(join(root, "q.jsonl"), [{ name: "q1", input: { question: "2+2" }, expected: "4" }, { name: "q2", input: { query: "3+3" }, expected: "6" }].map((r) => JSON.stringify(r)).join("\n"));
    const registry = new Registry();
    optimize({ id: "app-test", baseline: "Say nothing.", registry }, agent);
    optimize({ id: "tpl", baseline: new PromptTemplate({ systemPrompt: "s", userTemplate: "Q: {question}" }), registry }, (task, candidate) => {
      renders += 1;
      const messages = candidate.template.render(task.input);
      return { output: messages.at(-1)!.content.endsWith("2+2") ? "4" : "?", messages };
    });
    const target: Target = registry.get("app-test");
    container = await createContainer(target, { dataset: join(root, "rows.jsonl"), splits: join(root, "splits.json"), token: "s3cret", maxBodyBytes: 2000, log: (l) => logged.push(l) });
    url = await container.listen(0, "127.0.0.1");
    template = await createContainer(registry.get("tpl"), { dataset: join(root, "q.jsonl") });
    templateUrl = await template.listen(0);
  });

  after(async () => {
    await container.close();
    await template.close();
  });

  const auth = { authorization: "Bearer s3cret", "content-type": "application/json" };
  const rollout = (seed: string, candidate: Record<string, string> = { system_prompt: "echo" }) =>
    fetch(`${url}/rollout`, { method: "POST", headers: auth, body: JSON.stringify({ candidate, seed, run_id: "r", candidate_id: "c" }) });

  test("health is open; program and rollout need the token", async () => {
    assert.deepEqual(await (await fetch(`${url}/health`)).json() as any, { status: "ok", protocol: "gepa-container/1" });
    for (const [headers, word] of [[{}, "missing"], [{ authorization: "Bearer nope" }, "wrong"]] as const) {
      const res = await fetch(`${url}/program`, { headers });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
      assert.deepEqual(await res.json() as any, { error: { type: "Unauthorized", message: `${word} bearer token; send Authorization: Bearer <token>` } });
    }
    for (const header of ["bearer s3cret", "BEARER  s3cret"]) {
      assert.equal((await fetch(`${url}/program`, { headers: { authorization: header } })).status, 200, header);
    }
    const basic = await fetch(`${url}/program`, { headers: { authorization: "Basic s3cret" } });
    assert.deepEqual([basic.status, (await basic.json() as any).error.message.split(";")[0]], [401, "wrong bearer token"]);
    const program = await (await fetch(`${url}/program`, { headers: auth })).json() as any;
    assert.equal(program.program_id, "app-test");
    assert.match(program.fingerprint, /^[0-9a-f]{64}$/);
    assert.deepEqual(program.components, [{ name: "system_prompt", kind: "prompt", description: "", text: "Say nothing." }]);
    assert.deepEqual(Object.keys(program.metadata), ["dataset_size", "verifier", "warnings"]);
    assert.deepEqual([program.metadata.dataset_size, program.metadata.verifier], [ROWS.length, "normalized"]);
    const [holdout, labels] = program.metadata.warnings;
    assert.match(holdout, /^the holdout split is empty, so no lift can be measured/);
    assert.match(labels, /^1 of 9 served seeds have no expected value \(nolabel\); their rollouts answer 422: the normalized verifier/);
  });

  test("a rollout runs the target and scores it", async () => {
    const res = await rollout("ok");
    assert.equal(res.status, 200);
    const body = await res.json() as any;
    assert.equal(body.reward, 1);
    assert.deepEqual(body.objectives, { reward: 1 });
    assert.equal(body.feedback, "correct: predicted alpha");
    assert.deepEqual(body.usage.input_tokens + body.usage.output_tokens, 6);
    assert.deepEqual([body.usage.cached_input_tokens, body.usage.model], [0, null]);
    assert.equal(body.usage.cost_usd, 0.001);
    assert.deepEqual(body.trace.events, [
      { type: "task", seed: "ok", input: { input: "alpha" }, expected: "alpha" },
      { type: "agent_result", trace_id: "t-1", metadata: {} },
    ]);
    const miss = await (await rollout("ok", { system_prompt: "quiet" })).json() as any;
    assert.deepEqual([miss.reward, miss.feedback], [0, "predicted unknown, expected alpha"]);
  });

  test("caller mistakes are 4xx naming the problem", async () => {
    const unknown = await rollout("nope");
    assert.equal(unknown.status, 404);
    assert.match((await unknown.json() as any).error.message, /unknown seed 'nope'; program 'app-test' has 9 seeds/);
    const components = await rollout("ok", { prompt: "x" });
    assert.equal(components.status, 422);
    assert.deepEqual((await components.json() as any).error, {
      type: "ComponentMismatch",
      message: "candidate missing component(s): system_prompt; unknown component(s): prompt; the program's components are: system_prompt",
    });
    const bad = await fetch(`${url}/rollout`, { method: "POST", headers: auth, body: "{oops" });
    assert.equal(bad.status, 400);
    assert.match((await bad.json() as any).error.message, /^body is not valid JSON: /);
    const invalid = await fetch(`${url}/rollout`, { method: "POST", headers: auth, body: JSON.stringify({ candidate: { system_prompt: 1 }, seed: "" }) });
    assert.deepEqual((await invalid.json() as any).error, {
      type: "InvalidBody",
      message: "invalid rollout request: candidate.system_prompt: Input should be a valid string; seed: String should have at least 1 character",
    });
  });

  test("bodies over the limit are refused with 413, declared or streamed", async () => {
    const big = await rollout("ok", { system_prompt: "x".repeat(3000) });
    assert.equal(big.status, 413);
    assert.match((await big.json() as any).error.message, /body of \d+ bytes is over the limit of 2000 bytes/);
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${url}/rollout`, { method: "POST", headers: { authorization: "Bearer s3cret" } }, (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      for (let i = 0; i < 5; i++) req.write("y".repeat(1000));
      req.end();
    });
    assert.equal(streamed.status, 413);
    assert.match(streamed.body, /body is over the limit of 2000 bytes/);
  });

  test("rate limits and provider faults are 429/503 with Retry-After, never scored", async () => {
    const cases: [string, number, string | null][] = [
      ["rate", 429, "7"],
      ["busy", 503, null],
      ["provider429", 429, "3"],
      ["provider500", 503, "9"],
      ["refused", 503, null],
    ];
    for (const [seed, status, retryAfter] of cases) {
      const res = await rollout(seed);
      assert.equal(res.status, status, seed);
      assert.equal(res.headers.get("retry-after"), retryAfter, seed);
      assert.ok((await res.json() as any).error.message, seed);
    }
  });

  test("user mistakes are 422 with the field and the fix; a crash is a 500 that is logged", async () => {
    const int = await rollout("int");
    assert.equal(int.status, 422);
    const intError = (await int.json() as any).error;
    assert.equal(intError.type, "BadTargetResult");
    assert.match(intError.message, /target 'app-test' returned number; return an AgentResult, a string, or a plain object/);
    const nolabel = await rollout("nolabel");
    assert.equal(nolabel.status, 422);
    const labelError = (await nolabel.json() as any).error;
    assert.equal(labelError.type, "MissingLabel");
    assert.match(labelError.message, /seed 'nolabel' has no expected value; the normalized verifier compares the output with it: add an expected\/label\/answer value/);
    assert.ok(logged.some((l) => l.startsWith("rollout of 'app-test' refused (422 MissingLabel): seed 'nolabel'")));
    const crash = await rollout("crash");
    assert.equal(crash.status, 500);
    assert.deepEqual((await crash.json() as any).error, { type: "TypeError", message: "cannot read property of undefined" });
    assert.ok(logged.some((l) => l.includes("rollout of 'app-test' failed: TypeError: cannot read property")));
  });

  test("a template row missing a placeholder field is 422; broken demos score 0", async () => {
    const post = (seed: string, demos = "[]") =>
      fetch(`${templateUrl}/rollout`, { method: "POST", body: JSON.stringify({ candidate: { system_prompt: "s", demos }, seed }) });
    assert.equal((await (await post("q1")).json() as any).reward, 1);
    const missing = await post("q2");
    assert.equal(missing.status, 422);
    assert.deepEqual((await missing.json() as any).error, {
      type: "TemplateMismatch",
      message:
        "seed 'q2': user_template 'Q: {question}' needs field(s) question but the row has: input, query; " +
        "add the field(s) to the row or change the template's placeholders",
    });
    assert.equal(renders, 1, "the target never ran on the row it cannot render");
    const broken = await post("q1", "not json");
    assert.equal(broken.status, 200);
    const body = await broken.json() as any;
    assert.deepEqual([body.reward, body.output], [0, null]);
    assert.match(body.feedback, /component 'demos' is not valid JSON/);
  });

  test("unknown paths are 404, wrong methods 405 with Allow, HEAD and a trailing slash work", async () => {
    const missing = await fetch(`${url}/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json() as any, { error: { type: "HTTPError", message: "GET /nope: Not Found" } });
    const wrong = await fetch(`${url}/rollout`);
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "POST");
    assert.equal((await fetch(`${url}/health`, { method: "POST" })).headers.get("allow"), "HEAD, GET");
    const head = await fetch(`${url}/health`, { method: "HEAD" });
    assert.deepEqual([head.status, await head.text()], [200, ""]);
    const slash = await fetch(`${url}/health/`, { redirect: "manual" });
    assert.deepEqual([slash.status, slash.headers.get("location")], [307, "/health"]);
  });
});
