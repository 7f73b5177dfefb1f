import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { loadDataset } from "../src/dataset.js";
import { UserError } from "../src/errors.js";

function folder(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "gepa-ds-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
  return root;
}

test("columns map to name, input, expected and instruction; the rest is metadata", () => {
  const root = folder({ "rows.jsonl": '{"id": 7, "question": "q?", "answer": 3, "instruction": "be brief", "topic": "math"}\n' });
  const [task] = loadDataset(join(root, "rows.jsonl")).tasks;
  assert.deepEqual(task, { name: "7", input: { question: "q?" }, expected: 3, instruction: "be brief", metadata: { topic: "math" }, split: null, expectedSchema: null });
});

test("rows without a name are named after the file stem and their index among non-blank lines", () => {
  const root = folder({ "my.data.jsonl": '{"text": "a"}\n\n{"text": "b", "name": ""}\n' });
  assert.deepEqual(loadDataset(join(root, "my.data.jsonl")).tasks.map((t) => t.name), ["my.data-00000", "my.data-00001"]);
});

test("CSV with a byte-order mark, JSON lists and folders of split files", () => {
  const root = folder({
    "train.csv": "\ufefftext,label\nhi,greet\n",
    "test.json": '[{"input": "bye", "label": "farewell"}]',
    "splits.json": "{}",
  });
  const data = loadDataset(root);
  assert.deepEqual(data.tasks.map((t) => [t.name, t.input, t.expected]), [["test-00000", { input: "bye" }, "farewell"], ["train-00000", { text: "hi" }, "greet"]]);
  assert.deepEqual(data.fileSplits, { holdout: ["test-00000"], train: ["train-00000"] });
});

test("mistakes name the file, the row and the fix", () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ "a.jsonl": '{"label": "x"}\n' }, /a\.jsonl, row 1 \(line 1\): no input column; expected one of input, text/],
    [{ "a.jsonl": '{"text": "x"}\n\n{oops\n' }, /a\.jsonl, row 2 \(line 3\): invalid JSON/],
    [{ "a.json": '{"text": "x"}' }, /must hold a JSON list of objects, got object/],
    [{ "a.csv": 'text\n"two\nlines"\nx,y\n' }, /row 2 \(line 4\): more values than header columns/],
    [{ "a.csv": "id,text\nr1,hello\nr2,  \n" }, /a\.csv, row 2 \(line 3\) \(seed 'r2'\): its input column 'text' is blank; every row needs an input for the agent to work on: fill it in or remove the row/],
    [{ "a.jsonl": '{"input": null}\n' }, /row 1 \(line 1\) \(seed 'a-00000'\): its input column 'input' is null/],
    [{ "a.json": '[{"question": []}]' }, /item 0 \(seed 'a-00000'\): its input column 'question' is an empty list/],
    [{ "a.jsonl": '{"prompt": {}}\n' }, /its input column 'prompt' is an empty object/],
    [{ "a.jsonl": '{"text": ""}\n' }, /its input column 'text' is empty/],
    [{ "a.jsonl": '{"name": "n", "text": "x"}\n{"name": "n", "text": "y"}\n' }, /duplicate row names: n; names .* must be unique/],
  ];
  for (const [files, message] of cases) {
    const root = folder(files);
    assert.throws(() => loadDataset(join(root, Object.keys(files)[0]!)), (err: unknown) => err instanceof UserError && message.test(err.message));
  }
  const mixed = folder({ "train.jsonl": '{"text": "a"}\n', "extra.jsonl": '{"text": "b"}\n' });
  assert.throws(() => loadDataset(mixed), /mixes split files .* \(extra\.jsonl\)/);
  assert.throws(() => loadDataset(join(mixed, "nope.jsonl")), /does not exist/);
  writeFileSync(join(mixed, "notes.txt"), "x");
  assert.throws(() => loadDataset(join(mixed, "notes.txt")), /unsupported file type; use \.jsonl, \.json or \.csv/);
  const empty = join(mixed, "empty");
  mkdirSync(empty);
  assert.throws(() => loadDataset(empty), /has no \.jsonl, \.json or \.csv file/);
});
