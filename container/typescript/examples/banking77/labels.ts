/**
 * Map a model's free-text answer to one of the 77 Banking77 labels, as the Python example does
 * (examples/banking77/labels.py). In order: the stripped text is a label; its normalized form
 * (lower case, every run of non-alphanumerics as `_`) is a label's; a label's name appears in
 * the normalized text as whole words (the earliest one wins, the longest on a tie). Anything
 * else is `unknown`.
 */

export const UNKNOWN = "unknown";

/** Lower case, each run of other characters as one `_`, no `_` at the ends. */
export function normalizeLabel(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "");
}

/** The label `text` names, or `unknown`. */
export function parseLabel(text: string | null | undefined, labels: readonly string[]): string {
  if (!text) return UNKNOWN;
  const stripped = text.trim();
  if (labels.includes(stripped)) return stripped;
  const normalized = normalizeLabel(stripped);
  const byNorm = new Map(labels.map((label) => [normalizeLabel(label), label]));
  const exact = byNorm.get(normalized);
  if (exact !== undefined) return exact;
  const padded = `_${normalized}_`;
  let best: { at: number; length: number; label: string } | null = null;
  for (const [norm, label] of byNorm) {
    const at = padded.indexOf(`_${norm}_`);
    if (at < 0) continue;
    if (best === null || at < best.at || (at === best.at && norm.length > best.length)) best = { at, length: norm.length, label };
  }
  return best?.label ?? UNKNOWN;
}
