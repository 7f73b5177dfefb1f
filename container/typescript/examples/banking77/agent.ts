/**
 * Banking77 intent classification as a gepa-container target: the TypeScript twin of
 * examples/banking77 (see README.md beside this file).
 *
 *     npx gepa-container serve dist/examples/banking77/agent.js --port 8100
 *
 * A customer's query goes to the student model with the FIXED list of the 77 labels
 * (`Labels: a, b, ...`, never edited by the optimizer) followed by the candidate system prompt
 * (the list first, so a prompt cache reuses it from one candidate to the next); the
 * answer is parsed to a label and scored by `Banking77Verifier`. Importing this file reads the
 * environment (student settings and sample sizes) and writes the sampled seeds to a folder.
 */

import { AgentResult, optimize, type Candidate, type Task } from "gepa-container";

import { examplesByLabel, loadExamples, loadLabels, prepareDataset, sampleFromEnv } from "./data.js";
import { parseLabel } from "./labels.js";
import { complete, studentFromEnv, type Message } from "./student.js";
import { Banking77Verifier } from "./verifier.js";

const BASELINE = "Classify the user's banking intent. Return the best matching label.";
const DESCRIPTION =
  "System prompt of a Banking77 intent classifier. The user message is a customer's " +
  "query; the list of the 77 allowed labels comes before this prompt in the system message " +
  "(fixed by the program, not part of this text). The model must answer with exactly one label.";

// USD per million (input, output) tokens, for the spend the optimizer caps.
const PRICES: Record<string, [number, number]> = {
  "gpt-4o-mini": [0.15, 0.6],
  "gpt-4.1-mini": [0.4, 1.6],
  "gpt-4.1-nano": [0.1, 0.4],
};

const settings = studentFromEnv();
const labels = loadLabels();
const verifier = new Banking77Verifier(labels, examplesByLabel(loadExamples("train")));

/** The candidate prompt, then the fixed label list. */
export function buildMessages(prompt: string, query: string): Message[] {
  return [
    { role: "system", content: `Labels: ${labels.join(", ")}\n\n${prompt.trimEnd()}` },
    { role: "user", content: query },
  ];
}

function cost(model: string, inputTokens: number, outputTokens: number): number | null {
  const price = PRICES[model.replace(/^openai\//, "")];
  return price ? (inputTokens * price[0] + outputTokens * price[1]) / 1_000_000 : null;
}

/** Classify one query with the candidate prompt; the output is the parsed label. */
export async function classify(task: Task, candidate: Candidate): Promise<AgentResult> {
  const messages = buildMessages(candidate.text, String(task.input["text"]));
  const model = candidate.model ?? settings.model;
  const answer = await complete(settings, messages, model);
  return new AgentResult({
    output: parseLabel(answer.content, labels),
    usage: { inputTokens: answer.inputTokens, outputTokens: answer.outputTokens },
    costUsd: cost(model, answer.inputTokens, answer.outputTokens),
    metadata: { raw_output: answer.content, model: answer.model },
    messages: [...messages, { role: "assistant", content: answer.content }],
  });
}

optimize(
  {
    id: "banking77-intent",
    kind: "prompt",
    description: DESCRIPTION,
    baseline: BASELINE,
    verifier: (task, result) => verifier.score(task, result),
    dataset: prepareDataset(sampleFromEnv()),
    version: `student=${settings.model}`,
  },
  classify,
);
