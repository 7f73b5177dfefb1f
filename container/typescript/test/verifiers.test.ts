import assert from "node:assert/strict";
import { test } from "node:test";

import { UserMistake } from "../src/errors.js";
import { AgentResult, Score } from "../src/results.js";
import type { Task } from "../src/task.js";
import { formatG, normalizeText } from "../src/text.js";
import { loadVerifier } from "../src/verifiers.js";

const task = (expected: unknown): Task => ({ name: "s1", input: { input: "q" }, expected, instruction: "", metadata: {}, split: "train" });

async function score(spec: unknown, expected: unknown, output: unknown): Promise<Score> {
  const verifier = await loadVerifier(spec as Record<string, unknown>);
  return verifier.score(task(expected), new AgentResult({ output }));
}

test("normalized text: case folded, punctuation dropped, _ and - as spaces", () => {
  assert.equal(normalizeText("  Card_Arrival!! "), "card arrival");
  assert.equal(normalizeText("STRAßE—Ünïcode"), "strasse ünïcode");
  assert.equal(normalizeText({ b: 1, a: "X" }), "a x b 1");
});

test("built-in verifiers score and explain as the Python SDK's", async () => {
  assert.deepEqual(await score({ type: "normalized" }, "card_arrival", "Card arrival."), new Score(1, "correct: predicted Card arrival."));
  assert.deepEqual(await score({ type: "exact" }, "a", "A"), new Score(0, "predicted A, expected a"));
  assert.deepEqual(await score({ type: "contains" }, "Paris", "it is paris"), new Score(1, "correct: predicted it is paris"));
  assert.deepEqual(
    await score({ type: "contains", case_sensitive: true }, "Paris", "it is paris"),
    new Score(0, "predicted it is paris, expected it to contain Paris"),
  );
  assert.deepEqual(await score({ type: "regex", pattern: "^\\d+$" }, null, "42"), new Score(1, "correct: predicted 42 (matches /^\\d+$/)"));
  assert.deepEqual(await score({ type: "json_field", field: "intent" }, "refund", '{"intent": "Refund"}'), new Score(1, "correct: predicted intent=Refund"));
  assert.deepEqual(
    await score({ type: "json_field", field: "a.0" }, 1, "not json"),
    new Score(0, "predicted not json, expected a.0=1 (the output is not valid JSON)"),
  );
  assert.deepEqual(
    await score({ type: "numeric", abs_tol: 0.01 }, "1,234.5", "about 1234.504 dollars"),
    new Score(1, "correct: predicted 1234.5 (tolerance abs 0.01, rel 0)"),
  );
  assert.deepEqual(await score({ type: "numeric" }, 7, "none"), new Score(0, "predicted none, expected 7 (no number in the output)"));
});

test("Python's :g format", () => {
  assert.deepEqual([1e-6, 0, 1234567, 0.5, 1e-5, 100000, 123456.7].map(formatG), ["1e-06", "0", "1.23457e+06", "0.5", "1e-05", "100000", "123457"]);
});

test("a row with no label, or a label numeric cannot read, is a UserMistake naming the seed and the fix", async () => {
  await assert.rejects(
    score(undefined, null, "x"),
    (err: unknown) =>
      err instanceof UserMistake &&
      err.kind === "MissingLabel" &&
      /^seed 's1' has no expected value; the normalized verifier compares the output with it: add an expected\/label\/answer value to the row \(the label is read from the first of the columns expected, ground_truth, label, answer, category, output, target/.test(err.message),
  );
  await assert.rejects(score({ type: "numeric" }, "two", "2"), (err: unknown) => err instanceof UserMistake && err.kind === "BadLabel" && /expected value 'two' is not a number; the numeric verifier needs a number there/.test(err.message));
  assert.equal((await loadVerifier({ type: "regex", pattern: "x" })).needsLabel, false);
  assert.equal((await loadVerifier("contains")).needsLabel, true);
});

test("specs are validated: unknown type, unknown option, wrong type, bad pattern", async () => {
  await assert.rejects(loadVerifier({ type: "fuzzy" }), /unknown verifier type 'fuzzy'; built-in types: exact, normalized/);
  await assert.rejects(loadVerifier({ type: "exact", typo: 1 }), /typo: Extra inputs are not permitted/);
  await assert.rejects(loadVerifier({ type: "regex" }), /pattern: Field required/);
  await assert.rejects(loadVerifier({ type: "regex", pattern: "(" }), /pattern: invalid regular expression/);
  await assert.rejects(loadVerifier({ type: "numeric", abs_tol: -1 }), /abs_tol: Input should be greater than or equal to 0/);
  await assert.rejects(loadVerifier("llm_judge"), /only available in the Python SDK/);
  await assert.rejects(loadVerifier("fuzzy"), /is not a JSON file, a built-in type/);
});

test("the spec text the fingerprint hashes is Python's canonical JSON of the spec", async () => {
  assert.equal((await loadVerifier("numeric")).spec, '{"abs_tol": 1e-06, "rel_tol": 0.0, "type": "numeric"}');
  assert.equal((await loadVerifier({ type: "contains" })).spec, '{"case_sensitive": false, "type": "contains"}');
});

test("function verifiers may return a Score, a pair, a number, a boolean or a promise", async () => {
  for (const [value, expected] of [
    [new Score(0.5, "half"), new Score(0.5, "half")],
    [[1, "ok"], new Score(1, "ok")],
    [0.25, new Score(0.25)],
    [true, new Score(1)],
    [{ score: 0, feedback: "no" }, new Score(0, "no")],
  ] as const) {
    const verifier = await loadVerifier(async () => value);
    assert.deepEqual(await verifier.score(task("x"), new AgentResult({ output: "x" })), expected);
  }
  const bad = await loadVerifier(function judge() {
    return 7;
  });
  const isBadScore = (message: RegExp) => (err: unknown) => err instanceof UserMistake && err.kind === "BadScore" && message.test(err.message);
  await assert.rejects(bad.score(task("x"), new AgentResult({ output: "x" })), isBadScore(/verifier 'judge' returned an invalid score: score: must be a finite number in \[0, 1\], got 7; return a finite score in \[0, 1\]/));
  const wrong = await loadVerifier(() => "yes");
  await assert.rejects(wrong.score(task("x"), new AgentResult({ output: "x" })), isBadScore(/returned string; return a Score, a \[score, feedback\] pair, or a number in \[0, 1\]/));
  const pair = await loadVerifier(() => ["high", "looks right"]);
  await assert.rejects(pair.score(task("x"), new AgentResult({ output: "x" })), isBadScore(/returned a score of type string; a score must be a number in \[0, 1\]/));
});
