import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, "..", "src", "cli.js");
const ECHO = join(HERE, "fixtures", "echo-agent.js");
const TWO = join(HERE, "fixtures", "conformance-agent.js");
const DATA = mkdtempSync(join(tmpdir(), "gepa-cli-"));
writeFileSync(join(DATA, "rows.jsonl"), '{"name": "a", "input": "hi", "expected": "hi"}\n{"name": "b", "input": "yo", "expected": "yo"}\n');

// the flags' environment variables left out, so that the machine's settings do not leak in
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GEPA_")));

function run(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const done = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", env: ENV });
  return { status: done.status, stdout: done.stdout, stderr: done.stderr };
}

test("serve announces the address, answers, and stops on SIGTERM with exit code 0", async () => {
  const child = spawn(process.execPath, [CLI, "serve", ECHO, "--dataset", join(DATA, "rows.jsonl"), "--port", "0"], { stdio: ["ignore", "pipe", "pipe"], env: ENV });
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("\n")) resolve(out.trim());
    });
    child.on("exit", (code) => reject(new Error(`exited with ${code}`)));
  });
  const match = /^serving echo on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
  assert.ok(match, line);
  const answer = await fetch(`${match[1]}/rollout`, { method: "POST", body: JSON.stringify({ candidate: { system_prompt: "echo" }, seed: "a" }) });
  assert.equal(((await answer.json()) as { reward: number }).reward, 1);
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  child.kill("SIGTERM");
  assert.equal(await exited, 0);
});

test("mistakes exit with 2 and a message that says what to fix", () => {
  const cases: [string[], RegExp][] = [
    [["serve", ECHO], /target 'echo' has no dataset; pass --dataset PATH/],
    [["serve", ECHO, "--dataset", join(DATA, "missing.jsonl")], /dataset .*missing\.jsonl does not exist/],
    [["serve", ECHO, "--dataset", join(DATA, "rows.jsonl"), "--port", "http"], /--port \/ GEPA_CONTAINER_PORT must be a number, got "http"/],
    [["serve", ECHO, "--dataset", join(DATA, "rows.jsonl"), "--verifier", "fuzzy"], /verifier 'fuzzy' is not a JSON file, a built-in type/],
    [["serve", TWO, "--dataset", join(DATA, "rows.jsonl")], /registers 2 targets \(conformance, conformance-template\); pick one with .*:TARGET/],
    [["serve", `${TWO}:nope`, "--dataset", join(DATA, "rows.jsonl")], /has no optimization target 'nope'; found: conformance, conformance-template/],
    [["serve", join(DATA, "absent.js")], /no such file: /],
    [["serve", ECHO, "--bogus"], /Unknown option '--bogus'/],
    [["launch", ECHO], /expected "serve FILE\[:TARGET\]"/],
  ];
  for (const [args, message] of cases) {
    const done = run(...args);
    assert.equal(done.status, 2, `${args.join(" ")}: ${done.stderr}`);
    assert.match(done.stderr, message, args.join(" "));
  }
  assert.equal(run("--help").status, 0);
});

test("a target is picked by id or by its export name", () => {
  for (const spec of [`${TWO}:conformance-template`, `${TWO}:template`]) {
    const done = run("serve", spec, "--dataset", join(DATA, "rows.jsonl"), "--splits-file", join(DATA, "nope.json"));
    assert.match(done.stderr, /cannot read splits file/, spec); // the target was found: loading went on
  }
});
