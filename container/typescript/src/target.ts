/**
 * `optimize(options, fn)`, the {@link Target} it describes, and the registry of targets.
 *
 * A target is a function `(task, candidate) => AgentResult | string | object` (sync or async)
 * plus the surface the optimizer may rewrite: one or several named components with their
 * baseline text. `optimize` registers it and returns the function unchanged. The default
 * registry lives on `globalThis`, so an agent file and the CLI share it even when they load
 * two copies of this package.
 */

import { existsSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { UserError } from "./errors.js";
import { readPromptFile } from "./promptfile.js";
import { loadComponents, promptSource } from "./prompts.js";
import { isPlainObject, pyRepr } from "./python.js";
import { DEMOS_COMPONENT, PromptTemplate, SYSTEM_COMPONENT } from "./template.js";
import type { Candidate, Task } from "./task.js";
import type { VerifierLike } from "./verifiers.js";

export const COMPONENT_KINDS = ["prompt", "tool_description", "router_prompt", "retrieval_prompt", "agent"] as const;
/** What a component is, for the reflection model. */
export type ComponentKind = (typeof COMPONENT_KINDS)[number];
export const DEFAULT_COMPONENT = SYSTEM_COMPONENT;

/** A target function: returns an `AgentResult`, a string or a plain object, or a promise of one. */
export type TargetFn = (task: Task, candidate: Candidate) => unknown;

const DEMOS_DESCRIPTION =
  "Few-shot examples shown to the model before the task, as a JSON list of " +
  '{"input": ..., "output": "..."} objects (each input renders through the user template ' +
  "USER_TEMPLATE). Keep it a valid JSON list; an empty list [] means zero-shot.";

/** The options of {@link optimize}. */
export interface OptimizeOptions {
  id: string;
  kind?: ComponentKind;
  description?: string;
  /**
   * The starting text of one component, a map of component name to text, or a `PromptTemplate`;
   * or where the application keeps its prompt: a prompt file (`prompts/system.txt`, `.json`,
   * `.yaml`; relative to the agent's file first) or a registry version (`prompts:/NAME@ALIAS`,
   * read when the container is created).
   */
  baseline: string | Record<string, string> | PromptTemplate;
  /** A verifier function, a verifier JSON path, `file.js:exportName` or a spec object. */
  verifier?: VerifierLike;
  /** The default `--dataset`; a relative path is resolved against the agent's file when it exists there. */
  dataset?: string;
  /** The name of the single component when `baseline` is a string (default `system_prompt`). */
  component?: string;
  /** Folded into the program fingerprint: bump it when something outside the code changes. */
  version?: string;
  registry?: Registry;
  /**
   * The verifier's metrics that are minimised (or maximised), e.g. `{ toxicity: "minimize" }`:
   * served in `GET /program`, so the optimizer's `--select best-under` can bound them.
   */
  objectives?: Record<string, "maximize" | "minimize">;
}

/** A target function and everything the container needs to serve it. */
export interface Target {
  readonly id: string;
  readonly kind: ComponentKind;
  readonly description: string;
  /** Component name -> baseline text, in declaration order. */
  readonly baseline: Readonly<Record<string, string>>;
  readonly fn: TargetFn;
  readonly verifier: VerifierLike | null;
  readonly dataset: string | null;
  readonly version: string;
  /** The file that called `optimize` (its text is part of the fingerprint), or `""`. */
  readonly moduleFile: string;
  /** Where `optimize` was called (`file:line:column`): the same call site re-registers. */
  readonly origin: string;
  readonly template: PromptTemplate | null;
  /** The prompt file or registry URI the baseline is read from, as given (`null`: text). */
  readonly baselineSource: string | null;
  /** The component a registry version's one text becomes. */
  readonly baselineComponent: string;
  /** Metric name -> direction, as `GET /program` declares them. */
  readonly objectives: Readonly<Record<string, "maximize" | "minimize">>;
}

const TARGET = Symbol.for("gepa-container.target");

/** Targets by id. */
export class Registry {
  readonly #targets = new Map<string, Target>();

  /** Add `target`; registering again from the same call site (a reload) replaces it. */
  register(target: Target): void {
    const old = this.#targets.get(target.id);
    if (old !== undefined && old.origin !== target.origin) {
      throw new UserError(
        `optimization target id ${pyRepr(target.id)} is already used by ${old.origin}; give each target a unique id`,
      );
    }
    this.#targets.set(target.id, target);
  }

  /** The target with this id, or a `UserError` listing the known ids. */
  get(id: string): Target {
    const target = this.#targets.get(id);
    if (target === undefined) {
      const known = [...this.#targets.keys()].sort().join(", ") || "none";
      throw new UserError(`no optimization target ${pyRepr(id)}; registered: ${known}`);
    }
    return target;
  }

  /** All targets, in registration order. */
  list(): Target[] {
    return [...this.#targets.values()];
  }

  /** Forget every target (tests use this between cases). */
  clear(): void {
    this.#targets.clear();
  }
}

const REGISTRY = Symbol.for("gepa-container.registry");

/** The registry `optimize` uses unless told otherwise (one per process). */
export function defaultRegistry(): Registry {
  const holder = globalThis as { [REGISTRY]?: Registry };
  return (holder[REGISTRY] ??= new Registry());
}

/**
 * Register `fn` as an optimization target and return it unchanged.
 *
 * `baseline` is the starting text of one component (named `component`, by default
 * `system_prompt`), an object of component name to text for a multi-component program, or a
 * `PromptTemplate`: then the components are `system_prompt` and `demos` and the target reads
 * the candidate's template as `candidate.template`.
 */
export function optimize<F extends TargetFn>(options: OptimizeOptions, fn: F): F {
  if (!isPlainObject(options)) throw new UserError("optimize needs an options object: optimize({ id, baseline }, fn)");
  const { id, kind = "prompt", description = "", version = "" } = options;
  if (!id || typeof id !== "string") throw new UserError("optimize needs a non-empty string id");
  if (!(COMPONENT_KINDS as readonly string[]).includes(kind)) {
    throw new UserError(`optimize({ id: ${pyRepr(id)} }) has kind ${pyRepr(kind)}; allowed kinds: ${COMPONENT_KINDS.join(", ")}`);
  }
  if (typeof fn !== "function") throw new UserError(`optimize({ id: ${pyRepr(id)} }) needs a target function as its second argument`);
  const objectives = checkedObjectives(id, options.objectives);
  const template = options.baseline instanceof PromptTemplate ? options.baseline : null;
  const component = options.component ?? DEFAULT_COMPONENT;
  const site = callSite();
  const source = template ? null : promptSource(options.baseline, site.file ? dirname(site.file) : "");
  // A registry version is read when the container is created (`resolveBaseline`): fetching is async.
  const baseline =
    source === null
      ? template
        ? template.toComponents()
        : components(id, options.baseline, component)
      : "file" in source
        ? readPromptFile(source.file, component)
        : {};
  const target: Target = Object.freeze({
    id,
    kind,
    description,
    baseline: Object.freeze(baseline),
    fn,
    verifier: typeof options.verifier === "string" ? resolvePath(site.file, options.verifier) : (options.verifier ?? null),
    dataset: options.dataset === undefined ? null : resolvePath(site.file, options.dataset),
    version,
    moduleFile: site.file,
    origin: site.origin,
    template,
    baselineSource: source === null ? null : String(options.baseline),
    baselineComponent: component,
    objectives: Object.freeze(objectives),
  });
  (options.registry ?? defaultRegistry()).register(target);
  Object.defineProperty(fn, TARGET, { value: target, configurable: true });
  return fn;
}

/** `objectives` checked: metric names (not `reward`) to `maximize` or `minimize`. */
function checkedObjectives(id: string, given: unknown): Record<string, "maximize" | "minimize"> {
  if (given == null) return {};
  const entries = isPlainObject(given) ? Object.entries(given) : null;
  const bad = entries === null || entries.some(([n, d]) => n === "reward" || (d !== "maximize" && d !== "minimize"));
  if (bad) {
    throw new UserError(
      `optimize({ id: ${pyRepr(id)} }) objectives: give each metric's name (not 'reward', always maximised) and 'maximize' or 'minimize'`,
    );
  }
  return Object.fromEntries(entries) as Record<string, "maximize" | "minimize">;
}

/** `target` with its baseline read, when it comes from the prompt registry (else `target`). */
export async function resolveBaseline(target: Target, env: NodeJS.ProcessEnv = process.env): Promise<Target> {
  if (target.baselineSource === null || Object.keys(target.baseline).length > 0) return target;
  const baseline = await loadComponents(target.baselineSource, { component: target.baselineComponent, env });
  return Object.freeze({ ...target, baseline: Object.freeze(baseline) });
}

/** The target `optimize` attached to a function, if any. */
export function targetOf(value: unknown): Target | undefined {
  return typeof value === "function" ? (value as unknown as { [TARGET]?: Target })[TARGET] : undefined;
}

/** What the optimizer is told about one component. */
export function componentDescription(target: Target, name: string): string {
  if (target.template !== null && name === DEMOS_COMPONENT) {
    return DEMOS_DESCRIPTION.replace("USER_TEMPLATE", pyRepr(target.template.userTemplate));
  }
  return target.description;
}

/** Every target registered with the default registry. */
export function listOptimizationTargets(): Target[] {
  return defaultRegistry().list();
}

/** The target with this id from the default registry (`UserError` if unknown). */
export function getOptimizationTarget(id: string): Target {
  return defaultRegistry().get(id);
}

/** Empty the default registry. */
export function clearOptimizationTargets(): void {
  defaultRegistry().clear();
}

function components(id: string, baseline: unknown, component: string): Record<string, string> {
  if (typeof baseline === "string") {
    if (!component) throw new UserError(`optimize({ id: ${pyRepr(id)} }) needs a non-empty component name`);
    return { [component]: baseline };
  }
  if (isPlainObject(baseline) && Object.keys(baseline).length > 0) {
    const bad = Object.entries(baseline).filter(([k, v]) => !k || typeof v !== "string").map(([k]) => k);
    if (bad.length > 0) {
      throw new UserError(`optimize({ id: ${pyRepr(id)} }) baseline must map component names to text; bad entries: ${bad.join(", ")}`);
    }
    return { ...(baseline as Record<string, string>) };
  }
  throw new UserError(
    `optimize({ id: ${pyRepr(id)} }) baseline must be a string, a PromptTemplate or a non-empty object of component name -> text`,
  );
}

/** The file and `file:line:column` of the code that called `optimize`. */
function callSite(): { file: string; origin: string } {
  const frames = (new Error().stack ?? "").split("\n").slice(1);
  const here = fileURLToPath(import.meta.url);
  for (const frame of frames) {
    const match = /\(?((?:file:\/\/)?\/[^()]*?):(\d+):(\d+)\)?\s*$/.exec(frame);
    if (!match) continue;
    const file = match[1]!.startsWith("file://") ? fileURLToPath(match[1]!) : match[1]!;
    if (file === here) continue;
    return { file: realFile(file), origin: `${realFile(file)}:${match[2]}:${match[3]}` };
  }
  return { file: "", origin: `<unknown>:${frames.length}` };
}

function realFile(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}

/** `value` made absolute against `file`'s folder when it names a file there. */
function resolvePath(file: string, value: string): string {
  if (isAbsolute(value) || !file || (value.includes(":") && !value.endsWith(".json"))) return value;
  const candidate = resolve(dirname(file), value);
  return existsSync(candidate) ? candidate : value;
}
