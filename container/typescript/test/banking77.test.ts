import assert from "node:assert/strict";
import { test } from "node:test";

import { AgentResult } from "../src/results.js";
import { examplesByLabel, loadExamples, loadLabels, stratifiedSample } from "../examples/banking77/data.js";
import { parseLabel, UNKNOWN } from "../examples/banking77/labels.js";
import { studentFromEnv } from "../examples/banking77/student.js";
import { Banking77Verifier } from "../examples/banking77/verifier.js";

const LABELS = loadLabels();

test("answers map to labels as in the Python example", () => {
  const cases: [string | null, string][] = [
    ["card_arrival", "card_arrival"],
    ["  card_arrival\n", "card_arrival"],
    ["Card Arrival.", "card_arrival"],
    ['"lost-or-stolen-card"', "lost_or_stolen_card"],
    ["Label: top_up_failed", "top_up_failed"],
    ["The best matching label is card_payment_wrong_exchange_rate.", "card_payment_wrong_exchange_rate"],
    ["exchange_rate, not card_arrival", "exchange_rate"],
    ["I think this is about a card that has not arrived", UNKNOWN],
    ["", UNKNOWN],
    [null, UNKNOWN],
  ];
  for (const [text, label] of cases) assert.equal(parseLabel(text, LABELS), label, String(text));
});

test("the shipped data: 77 labels, rows named after their CSV row", () => {
  assert.equal(LABELS.length, 77);
  const test = loadExamples("test");
  assert.equal(test.length, 3080);
  assert.deepEqual(test[0], { name: "b77-test-00000", text: test[0]!.text, label: test[0]!.label });
});

test("the sample spreads evenly over labels, in file order, and repeats", () => {
  const train = loadExamples("train");
  const sample = stratifiedSample(train, 154, LABELS, 0, "train");
  const perLabel = new Map<string, number>();
  for (const e of sample) perLabel.set(e.label, (perLabel.get(e.label) ?? 0) + 1);
  assert.deepEqual(new Set(perLabel.values()), new Set([2]));
  assert.deepEqual(sample.map((e) => e.name), [...sample.map((e) => e.name)].sort());
  assert.deepEqual(stratifiedSample(train, 154, LABELS, 0, "train"), sample);
  assert.notDeepEqual(stratifiedSample(train, 154, LABELS, 1, "train"), sample);
});

test("wrong answers get feedback with real queries of both labels, never the seed's own", () => {
  const verifier = new Banking77Verifier(LABELS, examplesByLabel([
    { name: "a", text: "Where is my card?", label: "card_arrival" },
    { name: "b", text: "My card has not come yet", label: "card_arrival" },
    { name: "c", text: "How long does delivery take?", label: "card_delivery_estimate" },
  ]));
  const task = { name: "s", input: { text: "My card has not come yet" }, expected: "card_arrival", instruction: "", metadata: {}, split: null };
  assert.deepEqual(verifier.score(task, new AgentResult({ output: "Card arrival" })).score, 1);
  const wrong = verifier.score(task, new AgentResult({ output: "card_delivery_estimate" }));
  assert.equal(
    wrong.feedback,
    'predicted card_delivery_estimate, expected card_arrival for the query "My card has not come yet". ' +
      'Queries labelled card_arrival look like: "Where is my card?". Queries labelled card_delivery_estimate look like: "How long does delivery take?".',
  );
  const none = verifier.score(task, new AgentResult({ output: UNKNOWN, metadata: { raw_output: "Sorry" } }));
  assert.match(none.feedback, /^the output "Sorry" is not one of the 77 labels; expected card_arrival\. Answer with exactly one label/);
});

test("the student model defaults as in the Python example", () => {
  assert.equal(studentFromEnv({}).model, "student");
  assert.equal(studentFromEnv({ OPENAI_API_KEY: "k" }).model, "gpt-4o-mini");
  assert.equal(studentFromEnv({ OPENAI_API_KEY: "k", OPENAI_BASE_URL: "http://127.0.0.1:8012/v1/" }).model, "student");
  assert.equal(studentFromEnv({ GEPA_STUDENT_MODEL: "m", OPENAI_BASE_URL: "http://127.0.0.1:8012/v1/" }).baseUrl, "http://127.0.0.1:8012/v1");
});
