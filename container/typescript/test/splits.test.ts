import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { Dataset } from "../src/dataset.js";
import { defaultSplits, loadSplits } from "../src/splits.js";
import type { Task } from "../src/task.js";

function dataset(labels: string[]): Dataset {
  const tasks: Task[] = labels.map((label, i) => ({ name: `row-${i}`, input: { input: `q${i}` }, expected: label, instruction: "", metadata: {}, split: null }));
  return new Dataset(tasks);
}

test("the default split is 60/20/20, stratified by label, in dataset order, and repeatable", () => {
  const labels = Array.from({ length: 50 }, (_, i) => ["a", "b", "c", "d", "e"][i % 5]!);
  const splits = defaultSplits(dataset(labels));
  assert.deepEqual([splits.train.length, splits.val.length, splits.holdout.length], [30, 10, 10]);
  for (const names of [splits.train, splits.val, splits.holdout]) {
    const counts = new Map<string, number>();
    for (const n of names) counts.set(labels[Number(n.slice(4))]!, (counts.get(labels[Number(n.slice(4))]!) ?? 0) + 1);
    assert.equal(new Set(counts.values()).size, 1, "every label in proportion");
    assert.deepEqual([...names], [...names].sort((a, b) => Number(a.slice(4)) - Number(b.slice(4))));
  }
  assert.deepEqual(defaultSplits(dataset(labels)), splits);
  assert.notDeepEqual(defaultSplits(dataset(labels), 1), splits);
});

test("a tiny dataset keeps at least one train seed", () => {
  assert.deepEqual(defaultSplits(dataset(["x"])), { train: ["row-0"], val: [], holdout: [] });
  const two = defaultSplits(dataset(["x", "y"]));
  assert.equal(two.train.length, 2);
});

test("a splits file is checked: unknown splits and seeds, seeds in two splits, empty train", () => {
  const data = dataset(["a", "b", "c"]);
  const root = mkdtempSync(join(tmpdir(), "gepa-splits-"));
  const file = (body: unknown) => {
    const path = join(root, `s${Math.random()}.json`);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };
  assert.deepEqual(loadSplits(data, file({ train: ["row-0", "row-0"], test: ["row-2"] })), { train: ["row-0"], val: [], holdout: ["row-2"] });
  assert.throws(() => loadSplits(data, file({ training: [] })), /unknown split training; use train, val, holdout/);
  assert.throws(() => loadSplits(data, file({ train: ["row-9"] })), /name 1 seed\(s\) not in the dataset: row-9/);
  assert.throws(() => loadSplits(data, file({ train: ["row-0"], val: ["row-0"] })), /seed 'row-0' is in both train and val/);
  assert.throws(() => loadSplits(data, file({ holdout: ["row-0"] })), /the train split is empty/);
  assert.throws(() => loadSplits(data, file({ train: "row-0" })), /'train' must be a list of seed names/);
  assert.throws(() => loadSplits(data, file(["row-0"])), /must be an object like/);
  assert.throws(() => loadSplits(data, join(root, "missing.json")), /cannot read splits file/);
});
