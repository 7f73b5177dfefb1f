/**
 * Datasets: JSONL, JSON (a list of objects), CSV files, or a folder of them -> {@link Task} rows,
 * read exactly as the Python SDK reads them (container/dataset.py), so the same files give the
 * same seed names in both SDKs.
 *
 * Column mapping (the first column present wins, the rest go to `metadata`):
 * - name: `name` | `id`; otherwise `<file stem>-<row index, 5 digits>`
 * - input: `input` | `text` | `question` | `query` | `prompt` (required: a row whose input is
 *   missing, null, blank or empty is refused with its row number, never served). `Task.input`
 *   is always an object: an `input` object as is, any other value as `{column: value}`
 * - expected: `expected` | `ground_truth` | `label` | `answer` | `category` | `output` | `target`
 * - instruction: `instruction`; expected_schema: `expected_schema` (a JSON Schema object, in CSV
 *   as JSON text) (both optional)
 * - metadata: a `metadata` object column is the metadata itself; the other columns join it
 *
 * A folder whose files are named `train.*`, `val.*` (or `validation`/`dev`) and `holdout.*`
 * (or `test`) defines the splits by file. `splits.json` and `verifier.json` inside a folder
 * are companions, not data, and are skipped.
 */

import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";

import { parseCsvRows } from "./csv.js";
import { UserError } from "./errors.js";
import { compareCodePoints, isPlainObject, pyRepr, pyStr, pySplitLines, pyStrip, typeName } from "./python.js";
import type { SplitName, Task } from "./task.js";

export const NAME_COLUMNS = ["name", "id"] as const;
export const INPUT_COLUMNS = ["input", "text", "question", "query", "prompt"] as const;
export const EXPECTED_COLUMNS = ["expected", "ground_truth", "label", "answer", "category", "output", "target"] as const;
const SUFFIXES = [".jsonl", ".json", ".csv"];
const COMPANIONS = ["splits.json", "verifier.json"];
export const SPLIT_STEMS: Readonly<Record<string, SplitName>> = {
  train: "train",
  val: "val",
  validation: "val",
  dev: "val",
  holdout: "holdout",
  test: "holdout",
};

/** The rows of a dataset as tasks, in file order, with splits defined by file names if any. */
export class Dataset {
  readonly tasks: readonly Task[];
  readonly source: string;
  readonly fileSplits: Partial<Record<SplitName, string[]>> | null;
  readonly #byName: Map<string, Task>;

  constructor(tasks: Task[], source = "", fileSplits: Partial<Record<SplitName, string[]>> | null = null) {
    this.tasks = Object.freeze([...tasks]);
    this.source = source;
    this.fileSplits = fileSplits;
    this.#byName = new Map(tasks.map((t) => [t.name, t]));
  }

  get size(): number {
    return this.tasks.length;
  }

  has(name: string): boolean {
    return this.#byName.has(name);
  }

  /** The task named `name`, or `undefined`. */
  get(name: string): Task | undefined {
    return this.#byName.get(name);
  }
}

/** Read a dataset file or folder; a `UserError` says what is wrong and where. */
export function loadDataset(path: string): Dataset {
  const isDir = isDirectory(path);
  const files = isDir ? dataFiles(path) : [singleFile(path)];
  const splitOf = new Map(files.map((f) => [f, SPLIT_STEMS[stem(f).toLowerCase()]]));
  const splitFiles = files.filter((f) => splitOf.get(f));
  if (isDir && splitFiles.length > 0 && splitFiles.length !== files.length) {
    const others = files.filter((f) => !splitOf.get(f)).map((f) => basename(f)).join(", ");
    throw new UserError(
      `dataset folder ${path} mixes split files (train/val/holdout/test) with other ` +
        `files (${others}); put every row in a split file or use --splits-file`,
    );
  }
  const tasks: Task[] = [];
  const fileSplits: Partial<Record<SplitName, string[]>> = {};
  for (const file of files) {
    const rows = readRows(file).map(([where, row], i) => toTask(file, i, where, row));
    tasks.push(...rows);
    const split = splitOf.get(file);
    if (isDir && split) (fileSplits[split] ??= []).push(...rows.map((t) => t.name));
  }
  if (tasks.length === 0) throw new UserError(`dataset ${path} has no rows`);
  const counts = new Map<string, number>();
  for (const t of tasks) counts.set(t.name, (counts.get(t.name) ?? 0) + 1);
  const duplicates = [...counts].filter(([, c]) => c > 1).map(([n]) => n).sort(compareCodePoints);
  if (duplicates.length > 0) {
    throw new UserError(
      `dataset ${path} has duplicate row names: ${duplicates.slice(0, 10).join(", ")}; ` +
        "names (the name/id column) must be unique",
    );
  }
  return new Dataset(tasks, path, Object.keys(fileSplits).length > 0 ? fileSplits : null);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function dataFiles(folder: string): string[] {
  const files = readdirSync(folder)
    .sort(compareCodePoints)
    .map((name) => join(folder, name))
    .filter((p) => isFile(p) && SUFFIXES.includes(suffix(p).toLowerCase()) && !COMPANIONS.includes(basename(p)));
  if (files.length === 0) throw new UserError(`dataset folder ${folder} has no .jsonl, .json or .csv file`);
  return files;
}

function singleFile(path: string): string {
  if (!isFile(path)) throw new UserError(`dataset ${path} does not exist`);
  if (!SUFFIXES.includes(suffix(path).toLowerCase())) {
    throw new UserError(`dataset ${path}: unsupported file type; use .jsonl, .json or .csv`);
  }
  return path;
}

/** Python's `Path.suffix`: `.jsonl` of `a.b.jsonl`, nothing for `.hidden` or `name.`. */
export function suffix(path: string): string {
  const name = basename(path);
  const i = name.lastIndexOf(".");
  return i > 0 && i < name.length - 1 ? name.slice(i) : "";
}

/** Python's `Path.stem`. */
export function stem(path: string): string {
  const name = basename(path);
  const s = suffix(path);
  return s ? name.slice(0, -s.length) : name;
}

/** `[where, row]` pairs; `where` says how to find the row in the file. */
function readRows(file: string): [string, Record<string, unknown>][] {
  const text = readText(file);
  const kind = suffix(file).toLowerCase();
  if (kind === ".csv") {
    return parseCsvRows(text).map((row, i) => {
      const where = `row ${i + 1} (line ${row.line})`;
      if (row.extra) throw new UserError(`dataset file ${file}, ${where}: more values than header columns`);
      return [where, row.values];
    });
  }
  if (kind === ".jsonl") {
    const rows: [string, Record<string, unknown>][] = [];
    pySplitLines(text).forEach((line, i) => {
      if (!pyStrip(line)) return;
      const where = `row ${rows.length + 1} (line ${i + 1})`;
      rows.push([where, object(file, parseJson(file, line, where), where)]);
    });
    return rows;
  }
  const data = parseJson(file, text, "file");
  if (!Array.isArray(data)) {
    throw new UserError(`dataset file ${file} must hold a JSON list of objects, got ${typeName(data)}`);
  }
  return data.map((item, i) => [`item ${i}`, object(file, item, `item ${i}`)]);
}

function readText(file: string): string {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(readFileSync(file));
    return text.startsWith("\ufeff") ? text.slice(1) : text; // utf-8-sig, as Python reads it
  } catch (err) {
    throw new UserError(`cannot read dataset file ${file}: ${(err as Error).message}`);
  }
}

function parseJson(file: string, text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UserError(`dataset file ${file}, ${where}: invalid JSON (${(err as Error).message})`);
  }
}

function object(file: string, value: unknown, where: string): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw new UserError(`dataset file ${file}, ${where}: expected an object, got ${typeName(value)}`);
  }
  return value;
}

function toTask(file: string, index: number, where: string, row: Record<string, unknown>): Task {
  const rest: Record<string, unknown> = { ...row };
  let name = popFirst(rest, NAME_COLUMNS);
  if (name === null || name === undefined || pyStr(name) === "") name = `${stem(file)}-${String(index).padStart(5, "0")}`;
  const column = INPUT_COLUMNS.find((c) => c in rest);
  if (column === undefined) {
    const found = Object.keys(row).join(", ") || "no columns";
    throw new UserError(
      `dataset file ${file}, ${where}: no input column; expected one of ` +
        `${INPUT_COLUMNS.join(", ")}, found: ${found}`,
    );
  }
  const input = rest[column];
  delete rest[column];
  const missing = missingInput(input);
  if (missing !== null) {
    throw new UserError(
      `dataset file ${file}, ${where} (seed ${pyRepr(pyStr(name))}): its input column ${pyRepr(column)} ` +
        `is ${missing}; every row needs an input for the agent to work on: fill it in or remove the row`,
    );
  }
  const expected = popFirst(rest, EXPECTED_COLUMNS);
  const instruction = "instruction" in rest ? rest["instruction"] : "";
  delete rest["instruction"];
  const schema = expectedSchema(file, where, "expected_schema" in rest ? rest["expected_schema"] : null);
  delete rest["expected_schema"];
  return Object.freeze({
    name: pyStr(name),
    input: isPlainObject(input) ? input : { [column]: input },
    expected: expected ?? null,
    instruction: instruction === null || instruction === undefined ? "" : pyStr(instruction),
    metadata: metadataOf(file, where, rest),
    split: null,
    expectedSchema: schema,
  });
}

/** The row's other columns; a `metadata` object column is merged in, not nested. */
function metadataOf(file: string, where: string, rest: Record<string, unknown>): Record<string, unknown> {
  let nested = "metadata" in rest ? rest["metadata"] : null;
  delete rest["metadata"];
  if (typeof nested === "string" && pyStrip(nested).startsWith("{")) {
    nested = parseJson(file, nested, `${where}, column 'metadata'`);
  }
  if (nested === null || nested === undefined || nested === "") return rest;
  if (!isPlainObject(nested)) {
    throw new UserError(
      `dataset file ${file}, ${where}: column 'metadata' must be an object of fields, ` +
        `got ${typeName(nested)}; write it as {"key": value} or use plain columns`,
    );
  }
  const clash = Object.keys(nested).filter((k) => k in rest).sort(compareCodePoints);
  if (clash.length > 0) {
    throw new UserError(
      `dataset file ${file}, ${where}: metadata field(s) ${clash.join(", ")} are both a ` +
        "column and a key of the 'metadata' column; keep one of them",
    );
  }
  return { ...nested, ...rest };
}

/** The row's `expected_schema`: a JSON Schema object (JSON text in a CSV cell). */
function expectedSchema(file: string, where: string, value: unknown): Record<string, unknown> | null {
  if (value === null || value === undefined || value === "") return null;
  const parsed = typeof value === "string" ? parseJson(file, value, `${where}, column 'expected_schema'`) : value;
  if (!isPlainObject(parsed)) {
    throw new UserError(
      `dataset file ${file}, ${where}: column 'expected_schema' must be a JSON Schema ` +
        `object such as {"type": "object", "required": ["order_id"]}, got ${typeName(parsed)}`,
    );
  }
  return parsed;
}

/** How an input is missing (null, a blank string, an empty list or object), or `null` if it is not. */
function missingInput(value: unknown): string | null {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return value === "" ? "empty" : pyStrip(value) === "" ? "blank" : null;
  if (Array.isArray(value)) return value.length === 0 ? "an empty list" : null;
  if (isPlainObject(value)) return Object.keys(value).length === 0 ? "an empty object" : null;
  return null;
}

function popFirst(row: Record<string, unknown>, columns: readonly string[]): unknown {
  for (const column of columns) {
    if (column in row) {
      const value = row[column];
      delete row[column];
      return value;
    }
  }
  return null;
}
