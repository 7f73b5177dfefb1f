/**
 * Prompt files and prompt-registry URIs, read as the Python SDK reads them (schemas/prompt_file.py
 * and schemas/prompt_yaml.py): the optimized prompt and the served one are one artefact.
 *
 * A prompt file's format comes from its suffix: `.json` is an object of component name -> text,
 * `.yaml`/`.yml` the same mapping in a small YAML subset (literal blocks `|`, `|-`, `|+`; a
 * double-quoted, single-quoted or plain text on one line; comments and a leading `---`), any
 * other suffix the text of a one-component program, its final line break dropped. A registry
 * URI is `prompts:/NAME@ALIAS` or `prompts:/NAME/VERSION`.
 */

import { readFileSync } from "node:fs";
import { extname } from "node:path";

import { UserError } from "./errors.js";
import { isPlainObject, pyRepr } from "./python.js";

export const MAPPING_SUFFIXES = [".json", ".yaml", ".yml"];
/** Suffixes that make a one-line string a file path where text is also accepted (a baseline). */
export const PROMPT_SUFFIXES = [...MAPPING_SUFFIXES, ".txt", ".md", ".prompt", ".text"];
export const REGISTRY_SCHEME = "prompts:/";
export const FORMAT_TAG = "gepa.format";
export const COMPONENTS_JSON = "components-json";

/** A prompt-registry version: by alias or by version number. */
export interface RegistryRef {
  readonly name: string;
  readonly alias: string | null;
  readonly version: number | null;
  readonly uri: string;
}

/** Whether `value` is a string in the `prompts:/` scheme. */
export function isRegistryUri(value: unknown): boolean {
  return typeof value === "string" && value.startsWith(REGISTRY_SCHEME);
}

/** The name and alias (or version) of `prompts:/NAME@ALIAS` / `prompts:/NAME/VERSION`. */
export function parseRegistryUri(uri: string): RegistryRef {
  const match = /^prompts:\/([^/@]+)(?:@([^/@]+)|\/(\d+))$/.exec(uri.trim());
  if (match === null) {
    throw new UserError(
      `${pyRepr(uri)} is not a prompt-registry URI: write prompts:/NAME@ALIAS (e.g. prompts:/support-triage@production) or prompts:/NAME/VERSION`,
    );
  }
  const [, name, alias, version] = match;
  return { name: name!, alias: alias ?? null, version: version ? Number(version) : null, uri: uri.trim() };
}

/** The components in a prompt file (a text file is `{ [component]: text }`). */
export function readPromptFile(path: string, component = "system_prompt"): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new UserError(`cannot read the prompt file ${path}: ${(err as Error).message}; pass an existing file`);
  }
  const suffix = extname(path).toLowerCase();
  if (suffix === ".json") return componentsFromJson(text, path);
  if (MAPPING_SUFFIXES.includes(suffix)) return parseComponents(text, path);
  if (text.endsWith("\r\n")) text = text.slice(0, -2);
  else if (text.endsWith("\n")) text = text.slice(0, -1);
  return { [component]: text };
}

/** A JSON object of component name -> text; a `UserError` naming `where` otherwise. */
export function componentsFromJson(text: string, where: string): Record<string, string> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new UserError(`${where} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isPlainObject(data) || Object.keys(data).length === 0) {
    throw new UserError(`${where} must hold a JSON object of component name -> text, e.g. {"system_prompt": "..."}`);
  }
  const bad = Object.entries(data).filter(([k, v]) => !k || typeof v !== "string").map(([k]) => k);
  if (bad.length > 0) throw new UserError(`${where}: every component's value must be text; not: ${bad.join(", ")}`);
  return { ...(data as Record<string, string>) };
}

/** The components a registry version holds (its one text is `{ [component]: text }`). */
export function componentsFromRegistry(text: string, tags: Record<string, string>, where: string, component = "system_prompt"): Record<string, string> {
  if (tags[FORMAT_TAG] === COMPONENTS_JSON) return componentsFromJson(text, where);
  return { [component]: text };
}

const ENTRY = /^("(?:[^"\\]|\\.)*"|[^\s#"'][^:#]*?)\s*:(?:\s+(.*))?$/;
const BLOCK = /^\|([1-9]?)([-+]?)([1-9]?)\s*(?:#.*)?$/;

/** The components of a prompt file's YAML (the subset above), or a `UserError` naming the line. */
export function parseComponents(text: string, where = "the YAML file"): Record<string, string> {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  if (lines[lines.length - 1] === "") lines.pop(); // the last line break ends a line
  const out: Record<string, string> = {};
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (!line.trim() || line.startsWith("#") || (i === 0 && line.trimEnd() === "---")) {
      i += 1;
      continue;
    }
    const match = ENTRY.exec(line);
    if (line[0] === " " || line[0] === "\t" || match === null) throw lineError(where, i, line, "expected `name: text` at the start of the line");
    const key = match[1]!.startsWith('"') ? quoted(match[1]!, where, i) : match[1]!.trim();
    if (Object.hasOwn(out, key)) throw lineError(where, i, line, `component ${pyRepr(key)} is given twice`);
    const [value, next] = valueOf((match[2] ?? "").trim(), lines, i, where);
    out[key] = value;
    i = next;
  }
  if (Object.keys(out).length === 0) throw new UserError(`${where} holds no component: write \`system_prompt: |\` and the text`);
  return out;
}

function valueOf(raw: string, lines: string[], i: number, where: string): [string, number] {
  const block = BLOCK.exec(raw);
  if (block !== null) return literal(block, lines, i, where);
  if (raw.startsWith(">")) throw lineError(where, i, lines[i]!, "folded blocks (>) change the text: use | instead");
  if (raw === "" || /^([[{&*!]|- )/.test(raw)) throw lineError(where, i, lines[i]!, "a component's value must be text: use `|` and the text");
  if (raw.startsWith('"')) return [quoted(raw, where, i), i + 1];
  if (raw.startsWith("'")) {
    if (raw.length < 2 || !raw.endsWith("'")) throw lineError(where, i, lines[i]!, "a single-quoted text must end on its line");
    return [raw.slice(1, -1).replace(/''/g, "'"), i + 1];
  }
  const next = lines[i + 1];
  if (next !== undefined && (next[0] === " " || next[0] === "\t") && next.trim()) {
    throw lineError(where, i + 1, next, "a plain text on several lines: use `|` instead");
  }
  return [raw.split(/\s+#/)[0]!, i + 1];
}

function quoted(raw: string, where: string, i: number): string {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    value = null;
  }
  if (typeof value !== "string") throw lineError(where, i, raw, 'a double-quoted text must be one line with JSON escapes ("\\n")');
  return value;
}

function literal(block: RegExpExecArray, lines: string[], i: number, where: string): [string, number] {
  const digit = block[1] || block[3];
  const chomp = block[2];
  let j = i + 1;
  while (j < lines.length && (!lines[j]!.trim() || lines[j]![0] === " " || lines[j]![0] === "\t")) j += 1;
  const body = lines.slice(i + 1, j);
  const first = body.find((b) => b.trim());
  if (first === undefined) return ["", j];
  const indent = digit ? Number(digit) : first.length - first.replace(/^ +/, "").length;
  const content = body.map((line, k) => {
    if (line.trim() && (indent === 0 || line.slice(0, indent) !== " ".repeat(indent))) {
      throw lineError(where, i + 1 + k, line, "indent every line of a block by the same spaces");
    }
    return line.slice(indent);
  });
  let last = content.length - 1;
  while (!content[last]!.trim()) last -= 1;
  const text = content.slice(0, last + 1).join("\n");
  if (chomp === "-") return [text, j];
  return [text + "\n".repeat(1 + (chomp === "+" ? content.length - last - 1 : 0)), j];
}

function lineError(where: string, i: number, line: string, why: string): UserError {
  const shown = line.length <= 60 ? line : line.slice(0, 57) + "...";
  return new UserError(`${where}, line ${i + 1} (${pyRepr(shown)}): ${why}`);
}
