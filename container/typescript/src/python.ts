/**
 * Python's `json.dumps`, `str`, `repr` and its string splitting for JSON-like values, so that
 * what the Python SDK hashes, groups by or compares (the program fingerprint, the default
 * splits' label groups, verifier specs and feedback, dataset lines) is the same text here.
 *
 * JavaScript has one number type: a whole number up to 2**53 is written as a Python int (`3`),
 * any other as a Python float (`0.5`, `1e-07`, `1e+16`). A value the caller knows to be a float
 * is wrapped in {@link PyFloat} to be written as one (`0.0`). Data files that hold a float with
 * a small whole value (`3.0`) or an integer past 2**53 therefore hash differently in the two
 * SDKs; every other row hashes the same.
 */

/** A number that Python would hold as a float: written `1.0`, not `1`. */
export class PyFloat {
  constructor(readonly value: number) {}
}

/** Options of {@link pyDumps}, named as Python's. */
export interface DumpOptions {
  sortKeys?: boolean;
  ensureAscii?: boolean;
  /** `[item separator, key separator]`; Python's default is `[", ", ": "]`. */
  separators?: [string, string];
  /** Spaces per level; Python then separates items with `","` and a new line. */
  indent?: number;
}

/** `json.dumps(value, ...)` with `default=str`, as Python 3.11 writes it. */
export function pyDumps(value: unknown, options: DumpOptions = {}): string {
  const indent = options.indent;
  const [itemSep, keySep] = options.separators ?? (indent === undefined ? [", ", ": "] : [",", ": "]);
  const settings = { sortKeys: options.sortKeys ?? false, ensureAscii: options.ensureAscii ?? true, itemSep, keySep, indent };
  return dump(value, settings, 0);
}

interface Settings {
  sortKeys: boolean;
  ensureAscii: boolean;
  itemSep: string;
  keySep: string;
  indent: number | undefined;
}

function dump(value: unknown, s: Settings, level: number): string {
  if (value === null || value === undefined) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (value instanceof PyFloat) return pyFloatRepr(value.value, true);
  if (typeof value === "number") return pyNumber(value, true);
  if (typeof value === "string") return quote(value, s.ensureAscii);
  if (Array.isArray(value)) return container(value.map((v) => dump(v === undefined ? null : v, s, level + 1)), "[", "]", s, level);
  if (isPlainObject(value)) {
    let keys = Object.keys(value).filter((k) => value[k] !== undefined);
    if (s.sortKeys) keys = keys.sort(compareCodePoints);
    const items = keys.map((k) => quote(k, s.ensureAscii) + s.keySep + dump(value[k], s, level + 1));
    return container(items, "{", "}", s, level);
  }
  return quote(pyStr(value), s.ensureAscii); // default=str
}

function container(items: string[], open: string, close: string, s: Settings, level: number): string {
  if (items.length === 0) return open + close;
  if (s.indent === undefined) return open + items.join(s.itemSep) + close;
  const inner = "\n" + " ".repeat(s.indent * (level + 1));
  const outer = "\n" + " ".repeat(s.indent * level);
  return open + inner + items.join(s.itemSep + inner) + outer + close;
}

/** A plain `{...}` object (not an array, class instance or null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Order strings by code point, as Python does (JavaScript's default sorts UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function quote(text: string, ensureAscii: boolean): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const code = text.charCodeAt(i);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (code < 0x20 || (ensureAscii && code > 0x7e)) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

function pyNumber(value: number, json: boolean): string {
  if (Number.isSafeInteger(value) && !Object.is(value, -0)) return String(value);
  return pyFloatRepr(value, json); // past 2**53 JavaScript holds no exact integers: a float, as 1e16 is
}

/** Python's `repr(float)`: shortest round-trip digits, exponent below 1e-4 and from 1e16. */
export function pyFloatRepr(value: number, json = false): string {
  if (Number.isNaN(value)) return json ? "NaN" : "nan";
  if (!Number.isFinite(value)) return (value < 0 ? "-" : "") + (json ? "Infinity" : "inf");
  const [mantissa, exp] = value.toExponential().split("e") as [string, string];
  const exponent = Number(exp);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  let body: string;
  if (exponent < -4 || exponent >= 16) {
    const frac = digits.slice(1);
    const sign = exponent < 0 ? "-" : "+";
    body = digits[0] + (frac ? "." + frac : "") + "e" + sign + String(Math.abs(exponent)).padStart(2, "0");
  } else if (exponent < 0) {
    body = "0." + "0".repeat(-exponent - 1) + digits;
  } else {
    const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
    body = whole + "." + (digits.slice(exponent + 1) || "0");
  }
  return (negative ? "-" : "") + body;
}

/** Python's `str(value)` for JSON-like values (`True`, `None`, `['a', 1]`). */
export function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  return pyRepr(value);
}

/** Python's `repr(value)` for JSON-like values. */
export function pyRepr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (value instanceof PyFloat) return pyFloatRepr(value.value);
  if (typeof value === "number") return pyNumber(value, false);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") return reprString(value);
  if (Array.isArray(value)) return "[" + value.map(pyRepr).join(", ") + "]";
  if (isPlainObject(value)) {
    return "{" + Object.entries(value).map(([k, v]) => reprString(k) + ": " + pyRepr(v)).join(", ") + "}";
  }
  return String(value);
}

function reprString(text: string): string {
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === q || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += "\\x" + code.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + q;
}

/** A value's type as the error messages name it. */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "object") return isPlainObject(value) ? "object" : (value.constructor?.name ?? "object");
  return typeof value;
}

// Python's str.splitlines() and str.strip(): the line breaks and white space they know.
const LINE_BREAKS = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;
const PY_SPACE = "[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/** Python's `str.splitlines()`. */
export function pySplitLines(text: string): string[] {
  const lines = text.split(new RegExp(LINE_BREAKS.source));
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** Python's `str.strip()`. */
export function pyStrip(text: string): string {
  return text.replace(new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, "g"), "");
}

/** Python's `str.split()` with no argument. */
export function pySplitWhitespace(text: string): string[] {
  return pyStrip(text).split(new RegExp(`${PY_SPACE}+`)).filter((s) => s !== "");
}
