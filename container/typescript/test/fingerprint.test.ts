import assert from "node:assert/strict";
import { test } from "node:test";

import { Dataset } from "../src/dataset.js";
import { computeFingerprint } from "../src/fingerprint.js";
import { defaultSplits } from "../src/splits.js";
import { optimize, Registry, type Target } from "../src/target.js";
import type { Task } from "../src/task.js";
import { loadVerifier } from "../src/verifiers.js";

const rows = (labels: string[]): Task[] => labels.map((l, i) => ({ name: `r${i}`, input: { input: `q${i}` }, expected: l, instruction: "", metadata: {}, split: null }));

function target(options: { baseline?: string; version?: string; fn?: () => string } = {}): Target {
  const registry = new Registry();
  optimize({ id: "fp", baseline: options.baseline ?? "b", version: options.version ?? "", registry }, options.fn ?? (() => "x"));
  return registry.get("fp");
}

test("the fingerprint changes with what changes a rollout's result, and only with that", async () => {
  const data = new Dataset(rows(["a", "b", "a"]));
  const splits = defaultSplits(data);
  const normalized = await loadVerifier("normalized");
  const base = computeFingerprint(target(), data, splits, normalized);
  assert.match(base, /^[0-9a-f]{64}$/);
  assert.equal(computeFingerprint(target(), data, splits, normalized), base, "same inputs, same fingerprint");
  const changed = [
    computeFingerprint(target({ baseline: "c" }), data, splits, normalized),
    computeFingerprint(target({ version: "student=m2" }), data, splits, normalized),
    computeFingerprint(target({ fn: () => "y" }), data, splits, normalized),
    computeFingerprint(target(), new Dataset(rows(["a", "b", "b"])), splits, normalized),
    computeFingerprint(target(), data, { ...splits, train: splits.train.slice(1) }, normalized),
    computeFingerprint(target(), data, splits, await loadVerifier("exact")),
  ];
  assert.equal(new Set([base, ...changed]).size, changed.length + 1);
});
