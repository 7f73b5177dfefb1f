/**
 * The text helpers the built-in verifiers share with the Python SDK, written to give the same
 * results: {@link normalizeText} (Python's NFKC + casefold + no punctuation), the first number
 * in a text (Unicode digits included, as Python's `re` matches them) and Python's `:g` format.
 */

import { pyDumps, pySplitWhitespace } from "./python.js";

/** A value as text: `""` for null, a string as is, anything else as Python's JSON of it. */
export function textOf(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  return pyDumps(value, { ensureAscii: false, sortKeys: true });
}

/** `textOf(value)`, cut to `limit` characters with an ellipsis. */
export function shortText(value: unknown, limit = 200): string {
  const chars = Array.from(textOf(value));
  return chars.length <= limit ? chars.join("") : chars.slice(0, limit - 1).join("") + "…";
}

const CHEROKEE = /[\u13a0-\u13f5\u13f8-\u13fd\uab70-\uabbf]/u;

/**
 * Python's `str.casefold()`: each character upper-cased then lower-cased (`ß` -> `ss`,
 * `ς` -> `σ`), except where full case folding differs: Cherokee folds to upper case, `ı`
 * stays, `ẞ` is `ss`. Characters newer than Python's Unicode tables may still differ.
 */
export function casefold(text: string): string {
  return text.replace(/[^\x00-\x7f]|[A-Z]+/gu, (ch) => {
    if (ch === "ı") return ch;
    if (ch === "ẞ") return "ss";
    if (CHEROKEE.test(ch)) return ch.toUpperCase();
    return ch.toUpperCase().toLowerCase();
  });
}

const CONNECTOR_OR_DASH = /[\p{Pc}\p{Pd}]/gu;
const OTHER_PUNCTUATION = /\p{P}/gu;

/** Case-folded text without punctuation (`_`/`-` become spaces), whitespace collapsed. */
export function normalizeText(value: unknown): string {
  const folded = casefold(textOf(value).normalize("NFKC"));
  const spaced = folded.replace(CONNECTOR_OR_DASH, " ").replace(OTHER_PUNCTUATION, "");
  return pySplitWhitespace(spaced).join(" ");
}

const NUMBER = /[-+]?(?:\p{Nd}[\p{Nd},]*(?:\.\p{Nd}*)?|\.\p{Nd}+)(?:[eE][-+]?\p{Nd}+)?/u;

/** The first number in a value (a number itself, or the first one written in its text). */
export function firstNumber(value: unknown): number | null {
  if (typeof value === "number") return value;
  const match = NUMBER.exec(textOf(value));
  if (!match) return null;
  return Number(asciiDigits(match[0].replaceAll(",", "")));
}

/** Unicode decimal digits as ASCII ones (each Unicode digit block runs 0 to 9). */
function asciiDigits(text: string): string {
  return Array.from(text, (ch) => {
    if (!/\p{Nd}/u.test(ch)) return ch;
    let start = ch.codePointAt(0)!;
    while (/\p{Nd}/u.test(String.fromCodePoint(start - 1))) start--;
    return String((ch.codePointAt(0)! - start) % 10);
  }).join("");
}

/** Python's `f"{x:g}"`: 6 significant digits, trailing zeros dropped, exponent outside 1e-4..1e6. */
export function formatG(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x < 0 ? "-inf" : "inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const [mantissa, exp] = x.toExponential(5).split("e") as [string, string];
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 6) {
    const m = mantissa.replace(/\.?0+$/, "");
    return `${m}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  const fixed = x.toFixed(Math.max(0, 5 - exponent));
  return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
}

/** Python's `math.isclose`. */
export function isClose(a: number, b: number, relTol: number, absTol: number): boolean {
  if (a === b) return true;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
  const diff = Math.abs(a - b);
  return diff <= Math.abs(relTol * b) || diff <= Math.abs(relTol * a) || diff <= absTol;
}
