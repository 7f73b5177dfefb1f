/**
 * Verifiers: `(task, result) => Score | [score, feedback] | {score, feedback} | number`,
 * built-in or user code, with the same names, options, results and feedback as the Python
 * SDK's (container/verifiers.py, container/specs.py).
 *
 * `loadVerifier` takes a verifier JSON file, a built-in type name, a spec object, a
 * `file.js:exportName` string or a function. Built-ins write feedback the proposer can act on:
 * `"correct: predicted X"` on a match, `"predicted X, expected Y"` otherwise. With no verifier
 * at all the default is `normalized`. Built-in specs: `{"type": "exact"}`, `"normalized"`,
 * `{"type": "contains", "case_sensitive": false}`, `{"type": "regex", "pattern": "...",
 * "ignore_case": false}` (JavaScript RegExp syntax), `{"type": "json_field", "field": "a.b"}`,
 * `{"type": "numeric", "abs_tol": 1e-6, "rel_tol": 0}`. Unknown keys are refused: a typo is a
 * mistake. `llm_judge` is only in the Python SDK; use a function verifier here. A built-in that
 * compares with the row's expected value throws `UserMistake("MissingLabel")` (422) for a row
 * without one: every retry would fail the same way.
 */

import { existsSync, readFileSync, statSync } from "node:fs";

import { EXPECTED_COLUMNS, suffix } from "./dataset.js";
import { UserError, UserMistake } from "./errors.js";
import { importExport } from "./loader.js";
import { isPlainObject, PyFloat, pyDumps, pyRepr } from "./python.js";
import { AgentResult, coerceScore, Score } from "./results.js";
import type { Task } from "./task.js";
import { casefold, firstNumber, formatG, isClose, normalizeText, shortText, textOf } from "./text.js";

export const DEFAULT_VERIFIER = "normalized";
const LABELLED_TYPES = ["exact", "normalized", "contains", "json_field", "numeric"];
export const BUILTIN_TYPES = ["exact", "normalized", "contains", "regex", "json_field", "numeric"] as const;

/** A user verifier function; it may be async. */
export type VerifierFn = (task: Task, result: AgentResult) => unknown;

/** What a verifier may be given as. */
export type VerifierLike = Verifier | VerifierFn | string | Record<string, unknown>;

/** A named scoring function. `spec` is what the program fingerprint hashes. */
export class Verifier {
  /**
   * `needsLabel` is true for the built-ins that compare the output with the row's expected
   * value, so rows without one can be named before any rollout.
   */
  constructor(
    readonly name: string,
    readonly spec: string,
    readonly fn: VerifierFn,
    readonly needsLabel = false,
  ) {}

  /** Score one rollout; the verifier's return value is coerced to a `Score`. */
  async score(task: Task, result: AgentResult): Promise<Score> {
    return coerceScore(await this.fn(task, result), this.name);
  }
}

/** A `Verifier` from a path, a built-in name, a spec object, `file.js:exportName` or a function. */
export async function loadVerifier(value?: VerifierLike | null): Promise<Verifier> {
  if (value === undefined || value === null) return builtin({ type: DEFAULT_VERIFIER }, DEFAULT_VERIFIER);
  if (value instanceof Verifier) return value;
  if (typeof value === "function") return fromFunction(value, value.name || "verifier");
  if (isPlainObject(value)) return builtin(value, "verifier spec");
  if (typeof value === "string") {
    if (suffix(value).toLowerCase() === ".json" || isFile(value)) return builtin(readSpec(value), `verifier file ${value}`);
    if ((BUILTIN_TYPES as readonly string[]).includes(value)) return builtin({ type: value }, value);
    if (value === "llm_judge") throw new UserError(`verifier ${pyRepr(value)} ${LLM_JUDGE_HINT}`);
    if (value.includes(":")) {
      const fn = await importExport(value);
      if (typeof fn !== "function") throw new UserError(`verifier ${value} is not a function`);
      return fromFunction(fn as VerifierFn, value);
    }
    throw new UserError(
      `verifier ${pyRepr(value)} is not a JSON file, a built-in type (${BUILTIN_TYPES.join(", ")}) ` +
        "nor a file.js:exportName",
    );
  }
  throw new UserError(`cannot use ${typeof value} as a verifier`);
}

const LLM_JUDGE_HINT = "is only available in the Python SDK; write a function verifier that calls your judge model";

function isFile(path: string): boolean {
  try {
    return existsSync(path) && statSync(path).isFile();
  } catch {
    return false;
  }
}

function readSpec(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new UserError(`cannot read verifier file ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UserError(`verifier file ${path} is not valid JSON: ${(err as Error).message}`);
  }
}

function fromFunction(fn: VerifierFn, name: string): Verifier {
  return new Verifier(name, `${name}\n${fn.toString()}`, fn);
}

/** The options of each built-in type: name -> [kind, default]. */
const OPTIONS: Record<string, Record<string, ["bool" | "string" | "float", unknown]>> = {
  exact: {},
  normalized: {},
  contains: { case_sensitive: ["bool", false] },
  regex: { pattern: ["string", undefined], ignore_case: ["bool", false] },
  json_field: { field: ["string", undefined] },
  numeric: { abs_tol: ["float", 1e-6], rel_tol: ["float", 0] },
};

function builtin(data: unknown, where: string): Verifier {
  const spec = parseSpec(data, where);
  const type = spec["type"] as string;
  const canonical: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    canonical[key] = OPTIONS[type]![key]?.[0] === "float" ? new PyFloat(value as number) : value;
  }
  return new Verifier(type, pyDumps(canonical, { sortKeys: true }), BUILTINS[type]!(spec), LABELLED_TYPES.includes(type));
}

/** A validated spec with its defaults filled, or a `UserError` naming every bad field. */
export function parseSpec(data: unknown, where = "verifier spec"): Record<string, unknown> {
  if (!isPlainObject(data)) throw new UserError(`${where}: must be an object like {"type": "normalized"}`);
  const type = data["type"];
  if (type === "llm_judge") throw new UserError(`${where}: verifier type 'llm_judge' ${LLM_JUDGE_HINT}`);
  if (typeof type !== "string" || !(type in OPTIONS)) {
    throw new UserError(`${where}: unknown verifier type ${pyRepr(type ?? null)}; built-in types: ${BUILTIN_TYPES.join(", ")}`);
  }
  const options = OPTIONS[type]!;
  const problems: string[] = [];
  const spec: Record<string, unknown> = { type };
  for (const key of Object.keys(data)) {
    if (key !== "type" && !(key in options)) problems.push(`${key}: Extra inputs are not permitted`);
  }
  for (const [key, [kind, fallback]] of Object.entries(options)) {
    const value = key in data ? data[key] : fallback;
    const problem = optionProblem(kind, value);
    if (problem) problems.push(`${key}: ${problem}`);
    spec[key] = value;
  }
  if (problems.length === 0) problems.push(...semanticProblems(spec));
  if (problems.length > 0) throw new UserError(`${where}: ${problems.join("; ")}`);
  return spec;
}

function optionProblem(kind: "bool" | "string" | "float", value: unknown): string | null {
  if (value === undefined) return "Field required";
  if (kind === "bool" && typeof value !== "boolean") return "Input should be a valid boolean";
  if (kind === "string" && typeof value !== "string") return "Input should be a valid string";
  if (kind === "float" && (typeof value !== "number" || !Number.isFinite(value))) return "Input should be a valid number";
  if (kind === "float" && (value as number) < 0) return "Input should be greater than or equal to 0";
  return null;
}

function semanticProblems(spec: Record<string, unknown>): string[] {
  if (spec["type"] === "regex") {
    try {
      new RegExp(spec["pattern"] as string, "u");
    } catch (err) {
      return [`pattern: invalid regular expression: ${(err as Error).message}`];
    }
  }
  if (spec["type"] === "json_field" && (spec["field"] as string).length === 0) {
    return ["field: String should have at least 1 character"];
  }
  return [];
}

/** What to do about rows without an expected value under a `verifier` that needs one. */
export function missingLabelFix(verifier: string): string {
  return (
    `the ${verifier} verifier compares the output with it: add an expected/label/answer ` +
    `value to the row (the label is read from the first of the columns ${EXPECTED_COLUMNS.join(", ")}; ` +
    "others are metadata), or pass --verifier with one that needs none (a regex spec, or your own file.js:export)"
  );
}

function expectedOf(task: Task, verifier: string): unknown {
  if (task.expected === null || task.expected === undefined) {
    throw new UserMistake("MissingLabel", `seed ${pyRepr(task.name)} has no expected value; ${missingLabelFix(verifier)}`);
  }
  return task.expected;
}

function verdict(ok: boolean, predicted: string, expected: string, note = ""): Score {
  return ok ? new Score(1, `correct: predicted ${predicted}${note}`) : new Score(0, `predicted ${predicted}, expected ${expected}${note}`);
}

type Builder = (spec: Record<string, unknown>) => VerifierFn;

const BUILTINS: Record<string, Builder> = {
  exact: () => (task, result) => {
    const expected = expectedOf(task, "exact");
    return verdict(textOf(result.output) === textOf(expected), shortText(result.output), shortText(expected));
  },
  normalized: () => (task, result) => {
    const expected = expectedOf(task, "normalized");
    return verdict(normalizeText(result.output) === normalizeText(expected), shortText(result.output), shortText(expected));
  },
  contains: (spec) => (task, result) => {
    const expected = expectedOf(task, "contains");
    const out = textOf(result.output);
    const exp = textOf(expected);
    const ok = spec["case_sensitive"] ? out.includes(exp) : casefold(out).includes(casefold(exp));
    return verdict(ok, shortText(out), `it to contain ${shortText(exp)}`);
  },
  regex: (spec) => {
    const source = spec["pattern"] as string;
    const pattern = new RegExp(source, spec["ignore_case"] ? "iu" : "u");
    return (_task, result) => {
      const ok = pattern.test(textOf(result.output));
      return verdict(ok, shortText(result.output), `a match for /${source}/`, ok ? ` (matches /${source}/)` : "");
    };
  },
  json_field: (spec) => (task, result) => jsonField(spec["field"] as string, task, result),
  numeric: (spec) => (task, result) => {
    const expected = firstNumber(expectedOf(task, "numeric"));
    if (expected === null) {
      throw new UserMistake(
        "BadLabel",
        `seed ${pyRepr(task.name)}: expected value ${pyRepr(task.expected)} is not a number; the ` +
          "numeric verifier needs a number there (fix the row, or use another verifier)",
      );
    }
    const got = firstNumber(result.output);
    const absTol = spec["abs_tol"] as number;
    const relTol = spec["rel_tol"] as number;
    const tolerance = ` (tolerance abs ${formatG(absTol)}, rel ${formatG(relTol)})`;
    if (got === null) return verdict(false, shortText(result.output), formatG(expected), " (no number in the output)");
    return verdict(isClose(got, expected, relTol, absTol), formatG(got), formatG(expected), tolerance);
  },
};

function jsonField(field: string, task: Task, result: AgentResult): Score {
  const expected = expectedOf(task, "json_field");
  const want = `${field}=${shortText(expected)}`;
  let value = result.output;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return verdict(false, shortText(result.output), want, " (the output is not valid JSON)");
    }
  }
  for (const part of field.split(".")) {
    if (isPlainObject(value) && part in value) value = value[part];
    else if (Array.isArray(value) && /^[0-9]+$/.test(part) && Number(part) < value.length) value = value[Number(part)];
    else return verdict(false, shortText(result.output), want, ` (no field ${field})`);
  }
  const ok = pyEqual(value, expected) || normalizeText(value) === normalizeText(expected);
  return verdict(ok, `${field}=${shortText(value)}`, want);
}

/** Python's `==` on JSON values (`true == 1` included). */
function pyEqual(a: unknown, b: unknown): boolean {
  if (typeof a === "boolean" && typeof b === "number") return Number(a) === b;
  if (typeof a === "number" && typeof b === "boolean") return a === Number(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => pyEqual(x, b[i]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && pyEqual(a[k], b[k]));
  }
  return a === b;
}
