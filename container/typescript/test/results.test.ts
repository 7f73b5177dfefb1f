import assert from "node:assert/strict";
import { test } from "node:test";

import { UserError } from "../src/errors.js";
import { AgentResult, coerceResult } from "../src/results.js";

test("a target may return an AgentResult, a string or a plain object", () => {
  const result = new AgentResult({ output: "x", usage: { inputTokens: 3 } });
  assert.equal(coerceResult(result, "t"), result);
  assert.equal(coerceResult("hello", "t").output, "hello");
  const fromObject = coerceResult({ output: { a: 1 }, costUsd: 0.5, traceId: "tr-1", trace: { toolCalls: [{ name: "calc" }] } }, "t");
  assert.deepEqual([fromObject.output, fromObject.costUsd, fromObject.traceId, fromObject.trace.toolCalls], [{ a: 1 }, 0.5, "tr-1", [{ name: "calc" }]]);
  assert.deepEqual(fromObject.usage, { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 });
  assert.equal(fromObject.model, null);
  const priced = coerceResult({ output: "x", usage: { inputTokens: 9, cachedInputTokens: 4 }, model: "gpt-4o-mini" }, "t");
  assert.deepEqual([priced.usage.cachedInputTokens, priced.model], [4, "gpt-4o-mini"]);
});

test("anything else is a UserError naming the type and the shapes allowed", () => {
  for (const [value, name] of [[42, "number"], [null, "null"], [undefined, "undefined"], [["x"], "array"], [new Date(0), "Date"]] as const) {
    assert.throws(
      () => coerceResult(value, "t"),
      (err: unknown) => err instanceof UserError && err.message === `target 't' returned ${name}; return an AgentResult, a string, or a plain object with AgentResult fields (at least 'output')`,
    );
  }
});

test("a plain object with bad fields names each field and the fix", () => {
  assert.throws(() => coerceResult({ text: "x" }, "t"), /text: unknown field; allowed: output, .*; output: field required/);
  assert.throws(() => coerceResult({ output: "x", inputTokens: 3 }, "t"), /token counts go in usage: \{inputTokens, outputTokens, cachedInputTokens\}/);
  assert.throws(() => coerceResult({ output: "x", model: 4 }, "t"), /model: must be a string/);
  assert.throws(() => coerceResult({ output: "x", costUsd: -1, usage: { inputTokens: 1.5 } }, "t"), /costUsd: must be a finite number >= 0; usage.inputTokens: must be an integer >= 0/);
  assert.throws(() => new AgentResult({ output: "x", messages: "hi" as never }), /messages: must be a list of plain objects/);
});
