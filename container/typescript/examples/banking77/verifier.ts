/**
 * Score a Banking77 answer: normalized exact match, with feedback the proposer can act on, as
 * the Python example's verifier (examples/banking77/verifier.py). A wrong answer's feedback
 * names the predicted and the expected label and shows real training queries of both, which is
 * what separates two intents; an answer that is not a label says so and quotes it.
 */

import { Score, type AgentResult, type Task } from "gepa-container";

import { normalizeLabel, parseLabel, UNKNOWN } from "./labels.js";

export class Banking77Verifier {
  constructor(
    readonly labels: readonly string[],
    readonly examples: ReadonlyMap<string, readonly string[]>,
    readonly perLabel = 2,
  ) {}

  /** Score 1 when the answer maps to the expected label, else 0 with the reason. */
  score(task: Task, result: AgentResult): Score {
    const expected = String(task.expected);
    const raw = String(result.metadata?.["raw_output"] ?? result.output ?? "");
    const predicted = parseLabel(String(result.output ?? ""), this.labels);
    const query = String(task.input["text"] ?? "");
    if (normalizeLabel(predicted) === normalizeLabel(expected)) return new Score(1, `correct: predicted ${predicted}`);
    if (predicted === UNKNOWN) {
      const shown = raw.trim().slice(0, 120) || "(empty)";
      return new Score(
        0,
        `the output ${JSON.stringify(shown)} is not one of the ${this.labels.length} labels; expected ${expected}. ` +
          `Answer with exactly one label from the list and nothing else.${this.looksLike(expected, query)}`,
      );
    }
    return new Score(
      0,
      `predicted ${predicted}, expected ${expected} for the query ${JSON.stringify(query)}.` +
        `${this.looksLike(expected, query)}${this.looksLike(predicted, query)}`,
    );
  }

  /** A few real queries of `label`, never the seed's own. */
  private looksLike(label: string, exclude: string): string {
    const texts = (this.examples.get(label) ?? []).filter((t) => t !== exclude).slice(0, this.perLabel);
    if (texts.length === 0) return "";
    return ` Queries labelled ${label} look like: ${texts.map((t) => JSON.stringify(t)).join("; ")}.`;
  }
}
