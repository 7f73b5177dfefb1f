import assert from "node:assert/strict";
import { test } from "node:test";

import { UserError } from "../src/errors.js";
import { clearOptimizationTargets, getOptimizationTarget, listOptimizationTargets, optimize, Registry } from "../src/target.js";
import { Candidate } from "../src/task.js";
import { PromptTemplate } from "../src/template.js";

test("optimize registers the target and returns the function unchanged", () => {
  clearOptimizationTargets();
  const fn = async () => "x";
  assert.equal(optimize({ id: "a", baseline: "Be brief.", description: "d" }, fn), fn);
  const target = getOptimizationTarget("a");
  assert.deepEqual([target.kind, target.baseline, target.description], ["prompt", { system_prompt: "Be brief." }, "d"]);
  assert.match(target.moduleFile, /target\.test\.js$/);
  assert.deepEqual(listOptimizationTargets().map((t) => t.id), ["a"]);
  clearOptimizationTargets();
  assert.throws(() => getOptimizationTarget("a"), /no optimization target 'a'; registered: none/);
});

test("baselines: one component, several, or a PromptTemplate (system_prompt and demos)", () => {
  const registry = new Registry();
  optimize({ id: "one", baseline: "x", component: "router", registry }, () => "");
  optimize({ id: "many", kind: "tool_description", baseline: { a: "1", b: "2" }, registry }, () => "");
  optimize({ id: "tpl", baseline: new PromptTemplate({ systemPrompt: "s" }), registry }, () => "");
  assert.deepEqual(registry.get("one").baseline, { router: "x" });
  assert.deepEqual(registry.get("many").baseline, { a: "1", b: "2" });
  assert.deepEqual(Object.keys(registry.get("tpl").baseline), ["system_prompt", "demos"]);
});

test("objectives declare which way a verifier's metrics go", () => {
  const registry = new Registry();
  optimize({ id: "o", baseline: "x", objectives: { toxicity: "minimize", exact: "maximize" }, registry }, () => "");
  assert.deepEqual(registry.get("o").objectives, { toxicity: "minimize", exact: "maximize" });
  assert.deepEqual(registry.get("o").objectives, { ...registry.get("o").objectives });
  optimize({ id: "plain", baseline: "x", registry }, () => "");
  assert.deepEqual(registry.get("plain").objectives, {});
  for (const bad of [{ reward: "maximize" }, { toxicity: "lower" }, ["toxicity"]]) {
    assert.throws(() => optimize({ id: "bad", baseline: "x", objectives: bad as never, registry }, () => ""), /objectives: give each metric's name \(not 'reward'/);
  }
});

test("mistakes in optimize name the option and the fix", () => {
  const registry = new Registry();
  assert.throws(() => optimize({ id: "k", kind: "essay" as never, baseline: "x", registry }, () => ""), /kind 'essay'; allowed kinds: prompt, tool_description, router_prompt, retrieval_prompt, agent/);
  assert.throws(() => optimize({ id: "", baseline: "x", registry }, () => ""), /non-empty string id/);
  assert.throws(() => optimize({ id: "b", baseline: {}, registry }, () => ""), /baseline must be a string, a PromptTemplate or a non-empty object/);
  assert.throws(() => optimize({ id: "b", baseline: { a: 1 as never }, registry }, () => ""), /bad entries: a/);
  assert.throws(() => optimize({ id: "f", baseline: "x", registry }, "nope" as never), /needs a target function/);
  optimize({ id: "dup", baseline: "x", registry }, () => "");
  assert.throws(() => optimize({ id: "dup", baseline: "y", registry }, () => ""), (err: unknown) => err instanceof UserError && /id 'dup' is already used by .*target\.test\.js:\d+:\d+; give each target a unique id/.test(err.message));
});

test("candidate.text needs one component; candidate.template needs a template target", () => {
  assert.equal(new Candidate({ a: "x" }).text, "x");
  assert.throws(() => new Candidate({ b: "1", a: "2" }).text, /single-component program, this one has a, b; use candidate.components\[name\]/);
  assert.throws(() => new Candidate({ a: "x" }).template, /candidate.template needs a target declared with/);
});
