import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { createContainer } from "../src/app.js";
import { UserError } from "../src/errors.js";
import { parseComponents, parseRegistryUri, readPromptFile } from "../src/promptfile.js";
import { loadComponents, loadPrompt } from "../src/prompts.js";
import { optimize, Registry } from "../src/target.js";

const ROWS = [0, 1, 2, 3, 4, 5].map((i) => ({ name: `r${i}`, input: `q${i}`, expected: "a" }));

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), "gepa-prompts-"));
  writeFileSync(join(dir, "rows.jsonl"), ROWS.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return dir;
}

test("the YAML the Python SDK writes reads back as written", () => {
  // schemas/prompt_yaml.py's dump_components of tricky texts, as it writes them.
  const written =
    'a: |\n  x\nb: |+\n  x\n\n\nc: ""\nd: |2-\n    indented first\n  second\ne: |-\n  tab\tinside\nf: "ctrl\\u0001char"\n"g key": |-\n  v\nh: |-\n\n\n  leading blank\n  x\n';
  assert.deepEqual(parseComponents(written), {
    a: "x\n",
    b: "x\n\n\n",
    c: "",
    d: "  indented first\nsecond",
    e: "tab\tinside",
    f: "ctrl\u0001char",
    "g key": "v",
    h: "\n\nleading blank\nx",
  });
  const byHand = "---\n# prompts\nsystem_prompt: |\n  Be brief.\n  Cite.   # kept\n\nrouter: by topic  # cut\nq: 'it''s'\n";
  assert.deepEqual(parseComponents(byHand), { system_prompt: "Be brief.\nCite.   # kept\n", router: "by topic", q: "it's" });
});

test("YAML outside the subset names the line and the fix", () => {
  const cases: [string, RegExp][] = [
    ["a: >\n  x\n", /line 1 .*use \| instead/],
    ["a:\n  b: c\n", /must be text/],
    ["a: x\na: y\n", /line 2 .*given twice/],
    ["a: |\n    x\n  y\n", /line 3 .*same spaces/],
    ["a: plain\n  more\n", /use `\|` instead/],
  ];
  for (const [text, message] of cases) assert.throws(() => parseComponents(text, "p.yaml"), (err: unknown) => err instanceof UserError && message.test(err.message));
});

test("prompt files: text without its final line break, JSON and YAML of several components", () => {
  const dir = folder();
  writeFileSync(join(dir, "p.txt"), "Hello\n");
  writeFileSync(join(dir, "p.json"), JSON.stringify({ system_prompt: "s", router: "r" }));
  writeFileSync(join(dir, "p.yaml"), "system_prompt: |\n  s\nrouter: r\n");
  assert.deepEqual(readPromptFile(join(dir, "p.txt"), "instructions"), { instructions: "Hello" });
  assert.deepEqual(readPromptFile(join(dir, "p.json")), { system_prompt: "s", router: "r" });
  assert.deepEqual(readPromptFile(join(dir, "p.yaml")), { system_prompt: "s\n", router: "r" });
  assert.deepEqual(parseRegistryUri("prompts:/support/3"), { name: "support", alias: null, version: 3, uri: "prompts:/support/3" });
  assert.throws(() => parseRegistryUri("prompts:/a/b"), /prompts:\/NAME@ALIAS/);
});

test("optimize reads a baseline from a prompt file; a path with a typo is an error, text stays text", () => {
  const dir = folder();
  writeFileSync(join(dir, "system.txt"), "Answer with the label.\n");
  const registry = new Registry();
  optimize({ id: "file", baseline: join(dir, "system.txt"), registry }, () => "a");
  assert.deepEqual(registry.get("file").baseline, { system_prompt: "Answer with the label." });
  assert.equal(registry.get("file").baselineSource, join(dir, "system.txt"));
  assert.throws(() => optimize({ id: "typo", baseline: join(dir, "sytem.txt"), registry }, () => "a"), /prompt file .*sytem\.txt' does not exist .*fix the path/);
  optimize({ id: "text", baseline: "Answer in the style of notes.txt", registry }, () => "a");
  assert.deepEqual(registry.get("text").baseline, { system_prompt: "Answer in the style of notes.txt" });
});

describe("a baseline from the prompt registry", () => {
  const aliases: Record<string, number> = { production: 2 };
  const texts: Record<number, string> = { 1: "Old text.", 2: "New text." };
  const auth: (string | undefined)[] = [];
  let server: Server;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    server = createServer((req, res) => {
      auth.push(req.headers.authorization);
      const url = new URL(req.url ?? "/", "http://x");
      const params = url.searchParams;
      const number = url.pathname.endsWith("/registered-models/alias") ? aliases[params.get("alias") ?? ""] : Number(params.get("version"));
      const text = params.get("name") === "support" && number !== undefined ? texts[number] : undefined;
      res.setHeader("content-type", "application/json");
      if (text === undefined) {
        res.statusCode = 404;
        res.end(JSON.stringify({ error_code: "RESOURCE_DOES_NOT_EXIST", message: "nope" }));
        return;
      }
      const tags = [
        { key: "mlflow.prompt.is_prompt", value: "true" },
        { key: "mlflow.prompt.text", value: text },
      ];
      res.end(JSON.stringify({ model_version: { name: "support", version: String(number), tags } }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    env = { MLFLOW_TRACKING_URI: `http://127.0.0.1:${(server.address() as { port: number }).port}`, MLFLOW_TRACKING_TOKEN: "tok" };
  });

  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  test("the container serves the aliased version, and a new version keeps the fingerprint", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      const registry = new Registry();
      const dir = folder();
      optimize({ id: "reg", baseline: "prompts:/support@production", dataset: join(dir, "rows.jsonl"), registry }, () => "a");
      const target = registry.get("reg");
      assert.equal(target.baselineSource, "prompts:/support@production");
      const served = (await createContainer(target, { tracer: null })).served;
      assert.deepEqual(served.program.components.map((c) => [c.name, c.text]), [["system_prompt", "New text."]]);
      aliases["production"] = 1; // the alias moved: another text, the same cached rollouts
      const again = (await createContainer(target, { tracer: null })).served;
      assert.equal(again.program.components[0]!.text, "Old text.");
      assert.equal(again.program.fingerprint, served.program.fingerprint);
      aliases["production"] = 2;
    } finally {
      for (const key of Object.keys(env)) if (!(key in saved)) delete process.env[key];
    }
  });

  test("the application reads the same text; errors name the fix", async () => {
    assert.equal(await loadPrompt("prompts:/support/1", { env }), "Old text.");
    assert.deepEqual(await loadComponents("prompts:/support@production", { env, component: "router" }), { router: "New text." });
    assert.equal(auth.at(-1), "Bearer tok");
    await assert.rejects(loadPrompt("prompts:/support@staging", { env }), /not in the prompt registry .*--mlflow-prompt support/);
    await assert.rejects(loadPrompt("prompts:/support@production", { env: {} }), /set MLFLOW_TRACKING_URI/);
    await assert.rejects(loadPrompt("prompts:/support@production", { env: { MLFLOW_TRACKING_URI: "http://127.0.0.1:1" } }), /cannot read prompts:\/support@production/);
  });
});
