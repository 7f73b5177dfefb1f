/** What a target receives for one rollout: the {@link Task} (one dataset row) and the {@link Candidate}. */

import { UserMistake } from "./errors.js";
import type { PromptTemplate } from "./template.js";

/** `train`, `val` or `holdout`. */
export type SplitName = "train" | "val" | "holdout";

/**
 * One dataset row, named by a stable seed name. `input` is what the agent works on, always an
 * object of fields (a row's `text` column arrives as `{text: ...}`); `expected` what the
 * verifier compares against (`null` when the dataset has no such column); `expectedSchema` a
 * JSON Schema of the wanted output a verifier may use; `split` is the row's split or `null`
 * for a row in no split.
 */
export interface Task {
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly expected: unknown;
  readonly instruction: string;
  readonly metadata: Record<string, unknown>;
  readonly split: SplitName | null;
  readonly expectedSchema?: Record<string, unknown> | null;
}

/**
 * The row's own fields, what a user template's `{placeholders}` name: the metadata columns and
 * the input's fields (the input wins a clash); a single-field input also fills `{input}`.
 */
export function taskFieldsOf(task: Task): Record<string, unknown> {
  const fields: Record<string, unknown> = { ...task.metadata, ...task.input };
  const keys = Object.keys(task.input);
  if (keys.length === 1 && !("input" in fields)) fields["input"] = task.input[keys[0]!];
  return fields;
}

/** The row content that defines a task: what the program fingerprint hashes. */
export function taskRow(task: Task): Record<string, unknown> {
  return {
    name: task.name,
    input: task.input,
    expected: task.expected,
    instruction: task.instruction,
    metadata: task.metadata,
    ...(task.expectedSchema ? { expected_schema: task.expectedSchema } : {}),
  };
}

/**
 * The text of every component for this rollout, plus who asks and with which model. `model`
 * is the request's `policy.model`: `null` means "use the container's own default model".
 * `traceparent` is the rollout's span as a W3C header value (`null` when tracing is off): pass
 * it on to parent the agent's own spans.
 */
export class Candidate {
  readonly components: Readonly<Record<string, string>>;
  readonly candidateId: string;
  readonly model: string | null;
  readonly traceparent: string | null;
  readonly #template: PromptTemplate | null;

  constructor(
    components: Record<string, string>,
    options: {
      candidateId?: string;
      model?: string | null;
      template?: PromptTemplate | null;
      traceparent?: string | null;
    } = {},
  ) {
    this.components = Object.freeze({ ...components });
    this.candidateId = options.candidateId ?? "";
    this.model = options.model ?? null;
    this.traceparent = options.traceparent ?? null;
    this.#template = options.template ?? null;
  }

  /** The single component's text; an error naming the components when there are several. */
  get text(): string {
    const names = Object.keys(this.components);
    if (names.length !== 1) {
      throw new UserMistake(
        "CandidateMisuse",
        `candidate.text needs a single-component program, this one has ${names.sort().join(", ")}; ` +
          "use candidate.components[name] instead",
      );
    }
    return this.components[names[0]!]!;
  }

  /** The candidate as a prompt template (for targets declared with a `PromptTemplate`). */
  get template(): PromptTemplate {
    if (this.#template === null) {
      throw new UserMistake(
        "CandidateMisuse",
        "candidate.template needs a target declared with optimize({ baseline: new PromptTemplate(...) }); " +
          "this one has plain components",
      );
    }
    return this.#template;
  }
}
