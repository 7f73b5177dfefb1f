/**
 * Prompts loaded from where the application keeps them, as in the Python SDK
 * (container/prompts.py): `optimize({ baseline })` takes the text itself, a prompt file (a
 * one-line string ending in `.txt`, `.md`, `.prompt`, `.json`, `.yaml` or `.yml`) or a registry
 * URI (`prompts:/NAME@ALIAS`); the application reads the same prompt with `loadPrompt`.
 */

import { existsSync, statSync } from "node:fs";
import { extname, isAbsolute, resolve } from "node:path";

import { UserError } from "./errors.js";
import { componentsFromRegistry, isRegistryUri, parseRegistryUri, PROMPT_SUFFIXES, readPromptFile, type RegistryRef } from "./promptfile.js";
import { pyRepr } from "./python.js";
import { fetchPrompt } from "./registry.js";

/** Where a prompt lives: a file (its absolute path) or a registry version. */
export type PromptSource = { readonly file: string } | { readonly registry: RegistryRef };

/**
 * Where `value` says a prompt lives, or `null` when it is the text itself. A relative path is
 * looked up beside `baseDir` (the agent's folder), then in the working folder; a one-line
 * string with a prompt file's suffix that names no file is a `UserError` when it has no
 * space (a path with a typo), else the text itself.
 */
export function promptSource(value: unknown, baseDir = ""): PromptSource | null {
  if (typeof value !== "string") return null;
  if (isRegistryUri(value)) return { registry: parseRegistryUri(value as string) };
  const text = value.trim();
  if (text.includes("\n") || !PROMPT_SUFFIXES.includes(extname(text).toLowerCase())) return null;
  const places = isAbsolute(text) ? [text] : [...(baseDir ? [resolve(baseDir, text)] : []), resolve(text)];
  const found = places.find((p) => existsSync(p) && statSync(p).isFile());
  if (found !== undefined) return { file: found };
  if (/\s/.test(text)) return null;
  throw new UserError(`the prompt file ${pyRepr(text)} does not exist (looked at ${places.join(" and ")}); fix the path, or pass the prompt's text itself`);
}

/** Options of {@link loadComponents}. */
export interface LoadOptions {
  /** The component a single text is (default `system_prompt`). */
  component?: string;
  /** The folder a relative path is looked up in first. */
  baseDir?: string;
  env?: NodeJS.ProcessEnv;
}

/** The components a prompt file or registry version holds (one text is `{ [component]: text }`). */
export async function loadComponents(source: string | PromptSource, options: LoadOptions = {}): Promise<Record<string, string>> {
  const component = options.component ?? "system_prompt";
  const where = typeof source === "string" ? promptSource(source, options.baseDir) : source;
  if (where === null) {
    throw new UserError(`${pyRepr(String(source).slice(0, 80))} names no prompt file or registry version: pass a path (.txt, .md, .prompt, .json, .yaml) or prompts:/NAME@ALIAS`);
  }
  if ("file" in where) return readPromptFile(where.file, component);
  const version = await fetchPrompt(where.registry, options.env);
  return componentsFromRegistry(version.text, version.tags, where.registry.uri, component);
}

/** The one text of a prompt file or registry version (what an application serves). */
export async function loadPrompt(source: string, options: Omit<LoadOptions, "component"> = {}): Promise<string> {
  const components = await loadComponents(source, options);
  const names = Object.keys(components);
  if (names.length !== 1) throw new UserError(`${source} holds ${names.length} components (${names.join(", ")}): read them with loadComponents`);
  return components[names[0]!]!;
}
