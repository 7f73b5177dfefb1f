/**
 * Banking77 rows from the CSV files shipped in examples/banking77 (PolyAI, CC BY 4.0), and a
 * deterministic stratified sample of them written as a dataset folder the SDK serves.
 *
 * Seeds are named after their row in the CSV, as in the Python example: `b77-train-00042` is
 * row 42 of `train.csv` (after the header, from 0). The train split samples `train.csv`, the
 * holdout split `test.csv`; both walk one label order round-robin, so every label gets the same
 * number of queries (give or take one). The order is a hash of the seed, so the same settings
 * always give the same seeds (not the same ones as the Python example, which uses Python's
 * random module).
 */

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { loadDataset, UserError } from "gepa-container";

/** One labelled query. */
export interface Example {
  name: string;
  text: string;
  label: string;
}

/** How many train and holdout seeds to sample, and the sampling seed. */
export interface SampleConfig {
  trainSize: number;
  holdoutSize: number;
  seed: number;
}

/** Sizes from `B77_TRAIN_SIZE`, `B77_HOLDOUT_SIZE`, `B77_SEED` (defaults 24, 40, 0). */
export function sampleFromEnv(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  return { trainSize: int(env, "B77_TRAIN_SIZE", 24), holdoutSize: int(env, "B77_HOLDOUT_SIZE", 40), seed: int(env, "B77_SEED", 0) };
}

function int(env: NodeJS.ProcessEnv, key: string, fallback: number): number {
  const raw = env[key];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new UserError(`${key} must be a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

/** The folder of the shipped CSV files: `$B77_SOURCE_DIR`, else examples/banking77 above this file. */
export function sourceDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env["B77_SOURCE_DIR"]) return env["B77_SOURCE_DIR"];
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, "examples", "banking77");
    if (existsSync(join(candidate, "categories.json"))) return candidate;
  }
  throw new UserError("cannot find examples/banking77/categories.json; set B77_SOURCE_DIR to the folder of the Banking77 CSV files");
}

/** The 77 intent labels, in `categories.json` order. */
export function loadLabels(dir = sourceDir()): string[] {
  return JSON.parse(readFileSync(join(dir, "categories.json"), "utf8")) as string[];
}

/** Every row of `train.csv` or `test.csv`, named `b77-<file>-<row>`. */
export function loadExamples(file: "train" | "test", dir = sourceDir()): Example[] {
  return loadDataset(join(dir, `${file}.csv`)).tasks.map((task) => ({
    name: `b77-${task.name}`,
    text: String(task.input["text"]),
    label: String(task.expected),
  }));
}

/** Query texts per label, in file order. */
export function examplesByLabel(examples: readonly Example[]): Map<string, string[]> {
  const grouped = new Map<string, string[]>();
  for (const e of examples) {
    const texts = grouped.get(e.label);
    if (texts) texts.push(e.text);
    else grouped.set(e.label, [e.text]);
  }
  return grouped;
}

const hash = (text: string) => createHash("sha256").update(text).digest("hex");

/** `size` examples spread evenly over `labels`, in file order; the same arguments give the same list. */
export function stratifiedSample(examples: readonly Example[], size: number, labels: readonly string[], seed: number, split: string): Example[] {
  if (size > examples.length) throw new UserError(`${split} size ${size} is more than the ${examples.length} rows available`);
  const order = [...labels].sort((a, b) => hash(`${seed}:${a}`).localeCompare(hash(`${seed}:${b}`)));
  const pools = new Map<string, Example[]>(order.map((label) => [label, []]));
  for (const e of examples) pools.get(e.label)?.push(e);
  for (const pool of pools.values()) pool.sort((a, b) => hash(`${seed}:${split}:${a.name}`).localeCompare(hash(`${seed}:${split}:${b.name}`)));
  const picked = new Set<Example>();
  for (let depth = 0; picked.size < size; depth++) {
    for (const label of order) {
      const example = pools.get(label)![depth];
      if (example && picked.size < size) picked.add(example);
    }
  }
  return examples.filter((e) => picked.has(e));
}

/**
 * Write the sampled seeds as a dataset folder (`train.jsonl`, `holdout.jsonl`): the folder's
 * split files define the splits. `outDir` defaults to `$B77_DATA_DIR` or a folder in the
 * system's temp dir, one subfolder per config; files are rewritten atomically each time.
 */
export function prepareDataset(config: SampleConfig, outDir?: string, dir = sourceDir()): string {
  const base = outDir ?? process.env["B77_DATA_DIR"] ?? join(tmpdir(), "gepa-container", "banking77");
  const folder = resolve(base, `train${config.trainSize}-holdout${config.holdoutSize}-seed${config.seed}`);
  mkdirSync(folder, { recursive: true });
  const labels = loadLabels(dir);
  for (const [split, file, size] of [["train", "train", config.trainSize], ["holdout", "test", config.holdoutSize]] as const) {
    const rows = stratifiedSample(loadExamples(file, dir), size, labels, config.seed, split);
    const text = rows.map((e) => JSON.stringify({ name: e.name, text: e.text, category: e.label }) + "\n").join("");
    const tmp = join(folder, `.${split}.jsonl.${process.pid}`);
    writeFileSync(tmp, text);
    renameSync(tmp, join(folder, `${split}.jsonl`));
  }
  return folder;
}
