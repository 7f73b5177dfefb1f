/**
 * Import user code: `FILE[:TARGET]` for targets, `file.js:exportName` for verifiers.
 *
 * FILE is a path to an ES module or CommonJS file (relative to the current folder); importing
 * it runs its `optimize(...)` calls, which register targets. TARGET is a target id or the name
 * of an export that `optimize` returned; it may be left out when the file registers one target.
 */

import { existsSync, realpathSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { UserError } from "./errors.js";
import { pyRepr } from "./python.js";
import { defaultRegistry, targetOf, type Target } from "./target.js";

/** `"agent.js:name"` -> `["agent.js", "name"]`; the name part is optional. */
export function splitSpec(spec: string): [string, string | null] {
  const at = spec.lastIndexOf(":");
  const name = at < 0 ? "" : spec.slice(at + 1);
  if (at < 0 || !name || name.includes("/") || name.includes("\\")) return [spec, null];
  return [spec.slice(0, at), name];
}

/** Import a file; a `UserError` with the reason when it is missing or fails to load. */
export async function importFile(file: string): Promise<Record<string, unknown>> {
  if (!file) throw new UserError("empty file name; use FILE[:TARGET] with a path to a .js/.mjs/.cjs file");
  const path = resolve(file);
  if (!existsSync(path)) throw new UserError(`no such file: ${path}`);
  try {
    return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    const e = err as Error;
    throw new UserError(`importing ${path} failed: ${e?.name ?? "Error"}: ${e?.message ?? String(err)}`);
  }
}

/** The export named by `file.js:exportName`. */
export async function importExport(spec: string): Promise<unknown> {
  const [file, name] = splitSpec(spec);
  if (name === null) throw new UserError(`${pyRepr(spec)} is not a file.js:exportName spec`);
  const module = await importFile(file);
  if (!(name in module)) throw new UserError(`${pyRepr(file)} has no export ${pyRepr(name)}`);
  return module[name];
}

/** The `Target` named by `FILE[:TARGET]`. */
export async function loadTarget(spec: string): Promise<Target> {
  const [file, name] = splitSpec(spec);
  const module = await importFile(file);
  const targets = targetsOf(module, realpathSync(resolve(file)));
  if (name !== null) {
    const found = targetOf(module[name]) ?? targets.get(name);
    if (found) return found;
    const known = [...targets.keys()].sort().join(", ") || "none";
    throw new UserError(`${pyRepr(file)} has no optimization target ${pyRepr(name)}; found: ${known}`);
  }
  if (targets.size === 1) return [...targets.values()][0]!;
  if (targets.size === 0) {
    throw new UserError(
      `${pyRepr(file)} registers no optimization target; wrap a function with optimize({ id, baseline }, fn)`,
    );
  }
  const ids = [...targets.keys()].sort().join(", ");
  throw new UserError(`${pyRepr(file)} registers ${targets.size} targets (${ids}); pick one with ${file}:TARGET`);
}

/** Targets defined by the file: registered from it, or returned by `optimize` and exported. */
function targetsOf(module: Record<string, unknown>, file: string): Map<string, Target> {
  const found = new Map(defaultRegistry().list().filter((t) => t.moduleFile === file).map((t) => [t.id, t]));
  for (const value of Object.values(module)) {
    const target = targetOf(value);
    if (target && !found.has(target.id)) found.set(target.id, target);
  }
  return found;
}
