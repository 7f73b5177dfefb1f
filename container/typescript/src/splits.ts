/**
 * Which seeds are `train`, `val` and `holdout`, exactly as the Python SDK decides
 * (container/splits.py): the same rows give the same splits in both SDKs.
 *
 * In order of precedence: a splits file `{"train": [...], "val": [...], "holdout": [...]}`,
 * the dataset folder's split files (`train.jsonl` ...), or a deterministic stratified default:
 * rows are grouped by their expected value, spread evenly through one interleaved order (so
 * every label is represented in proportion) and cut 60/20/20, with at least one train seed.
 * The order depends only on the row names and `seed`, so it never changes between runs and
 * adding a row moves few others.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import { SPLIT_STEMS, type Dataset } from "./dataset.js";
import { UserError } from "./errors.js";
import { compareCodePoints, isPlainObject, pyDumps, pyRepr } from "./python.js";
import type { SplitName } from "./task.js";

export const SPLIT_NAMES: readonly SplitName[] = ["train", "val", "holdout"];

/** Seed names per split, each in dataset order. */
export interface Splits {
  readonly train: readonly string[];
  readonly val: readonly string[];
  readonly holdout: readonly string[];
}

/** `train`, `val`, `holdout`, or `null` for a row in no split. */
export function splitOf(splits: Splits, name: string): SplitName | null {
  return SPLIT_NAMES.find((s) => splits[s].includes(name)) ?? null;
}

/** The splits of `dataset`: from `splitsFile`, from split files, or the default. */
export function loadSplits(dataset: Dataset, splitsFile?: string | null, seed = 0): Splits {
  if (splitsFile !== undefined && splitsFile !== null) return fromMapping(dataset, readSplitsFile(splitsFile), splitsFile);
  if (dataset.fileSplits) return fromMapping(dataset, { ...dataset.fileSplits }, dataset.source);
  return defaultSplits(dataset, seed);
}

/** Stratified by expected value: `fractions` are (val, holdout); train gets the rest. */
export function defaultSplits(dataset: Dataset, seed = 0, fractions: [number, number] = [0.2, 0.2]): Splits {
  const groups = new Map<string, string[]>();
  for (const task of dataset.tasks) {
    const key = pyDumps(task.expected, { sortKeys: true });
    const group = groups.get(key);
    if (group) group.push(task.name);
    else groups.set(key, [task.name]);
  }
  const keyed: [number, string, string][] = [];
  for (const names of groups.values()) {
    const ordered = names.map((n) => [hash(seed, n), n] as const).sort((a, b) => compareCodePoints(a[0], b[0]));
    ordered.forEach(([h, n], i) => keyed.push([(i + 0.5) / ordered.length, h, n]));
  }
  keyed.sort((a, b) => a[0] - b[0] || compareCodePoints(a[1], b[1]) || compareCodePoints(a[2], b[2]));
  const order = keyed.map(([, , name]) => name);
  const n = order.length;
  let nVal = Math.floor(fractions[0] * n + 0.5);
  let nHoldout = Math.floor(fractions[1] * n + 0.5);
  while (n - nVal - nHoldout < 1 && (nVal || nHoldout)) {
    if (nVal) nVal -= 1;
    else nHoldout -= 1;
  }
  const nTrain = n - nVal - nHoldout;
  const position = new Map(dataset.tasks.map((t, i) => [t.name, i]));
  const pick = (names: string[]) => names.sort((a, b) => position.get(a)! - position.get(b)!);
  return {
    train: pick(order.slice(0, nTrain)),
    val: pick(order.slice(nTrain, nTrain + nVal)),
    holdout: pick(order.slice(nTrain + nVal)),
  };
}

function hash(seed: number, name: string): string {
  return createHash("sha256").update(`${seed}:${name}`, "utf8").digest("hex");
}

function readSplitsFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new UserError(`cannot read splits file ${path}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new UserError(`splits file ${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isPlainObject(data)) {
    throw new UserError(`splits file ${path} must be an object like {"train": [...], "holdout": [...]}`);
  }
  return data;
}

function fromMapping(dataset: Dataset, data: Record<string, unknown>, where: string): Splits {
  const unknownKeys = Object.keys(data).filter((k) => !(k in SPLIT_STEMS)).sort(compareCodePoints);
  if (unknownKeys.length > 0) {
    throw new UserError(`splits in ${where}: unknown split ${unknownKeys.join(", ")}; use train, val, holdout`);
  }
  const splits: Record<SplitName, string[]> = { train: [], val: [], holdout: [] };
  for (const [key, names] of Object.entries(data)) {
    if (!Array.isArray(names) || !names.every((n) => typeof n === "string")) {
      throw new UserError(`splits in ${where}: ${pyRepr(key)} must be a list of seed names`);
    }
    splits[SPLIT_STEMS[key]!].push(...names);
  }
  const all = SPLIT_NAMES.flatMap((s) => splits[s]);
  const missing = [...new Set(all.filter((n) => !dataset.has(n)))].sort(compareCodePoints);
  if (missing.length > 0) {
    const more = missing.length > 20 ? ` (+${missing.length - 20} more)` : "";
    throw new UserError(
      `splits in ${where} name ${missing.length} seed(s) not in the dataset: ${missing.slice(0, 20).join(", ")}${more}`,
    );
  }
  const seen = new Map<string, SplitName>();
  for (const split of SPLIT_NAMES) {
    for (const name of splits[split]) {
      const before = seen.get(name);
      if (before !== undefined && before !== split) {
        throw new UserError(`splits in ${where}: seed ${pyRepr(name)} is in both ${before} and ${split}`);
      }
      seen.set(name, split);
    }
  }
  if (splits.train.length === 0) throw new UserError(`splits in ${where}: the train split is empty`);
  return { train: [...new Set(splits.train)], val: [...new Set(splits.val)], holdout: [...new Set(splits.holdout)] };
}
