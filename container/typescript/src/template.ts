/**
 * Prompt templates: a system prompt, a user template with `{placeholders}`, few-shot demos,
 * as in the Python SDK (schemas/template.py). A target declared with one is served as two
 * components, `system_prompt` and `demos` (a JSON list), and reads the candidate's version as
 * `candidate.template`; `template.render(task.input)` gives the chat messages.
 *
 * A task's input is either an object of fields (`{question, unit}`) or a single value, which
 * fills `{input}`. Placeholders are plain names: Python's `{x!r}` and `{x:>5}` are refused.
 */

import { TemplateError } from "./errors.js";
import { isPlainObject, pyDumps, pyRepr, pyStr, typeName } from "./python.js";

export const SYSTEM_COMPONENT = "system_prompt";
export const DEMOS_COMPONENT = "demos";

/** One few-shot example: the task's input (fields or one value) and the wanted output. */
export interface Demo {
  input: unknown;
  output: string;
}

/** One chat message. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

type Piece = { literal: string } | { field: string };

/** System prompt + user template + ordered few-shot demos. */
export class PromptTemplate {
  readonly systemPrompt: string;
  readonly userTemplate: string;
  readonly demos: readonly Demo[];
  readonly #pieces: Piece[];

  constructor(init: { systemPrompt: string; userTemplate?: string; demos?: Demo[] }) {
    if (typeof init.systemPrompt !== "string") {
      throw new TemplateError("PromptTemplate systemPrompt must be a string");
    }
    this.systemPrompt = init.systemPrompt;
    this.userTemplate = init.userTemplate ?? "{input}";
    this.#pieces = parseTemplate(this.userTemplate);
    if (!this.#pieces.some((p) => "field" in p)) {
      throw new TemplateError("userTemplate needs at least one {placeholder}, e.g. '{input}'");
    }
    this.demos = Object.freeze((init.demos ?? []).map((d, i) => checkDemo(d, `demos item ${i}`)));
  }

  /** The field names the user template uses, in order of first use. */
  get placeholders(): string[] {
    return [...new Set(this.#pieces.flatMap((p) => ("field" in p ? [p.field] : [])))];
  }

  /** The chat messages of one task: system, each demo as user/assistant, then the task. */
  render(taskInput: unknown): ChatMessage[] {
    const messages: ChatMessage[] = [{ role: "system", content: this.systemPrompt }];
    for (const demo of this.demos) {
      messages.push({ role: "user", content: this.fill(taskFields(demo.input)) });
      messages.push({ role: "assistant", content: demo.output });
    }
    messages.push({ role: "user", content: this.fill(taskFields(taskInput)) });
    return messages;
  }

  /** The template as optimizer components: `system_prompt` and `demos` (JSON). */
  toComponents(): Record<string, string> {
    return { [SYSTEM_COMPONENT]: this.systemPrompt, [DEMOS_COMPONENT]: demosToText(this.demos) };
  }

  /** This template with the system prompt and demos taken from `components`. */
  withComponents(components: Record<string, string>): PromptTemplate {
    return new PromptTemplate({
      systemPrompt: components[SYSTEM_COMPONENT] ?? this.systemPrompt,
      userTemplate: this.userTemplate,
      demos: DEMOS_COMPONENT in components ? demosFromText(components[DEMOS_COMPONENT]!) : [...this.demos],
    });
  }

  /** Throw a `TemplateError` naming the first demo whose input does not fit the template. */
  checkDemos(): void {
    this.demos.forEach((demo, i) => {
      try {
        this.fill(taskFields(demo.input));
      } catch (err) {
        if (err instanceof TemplateError) {
          throw new TemplateError(`component ${pyRepr(DEMOS_COMPONENT)} item ${i}: ${err.message}`);
        }
        throw err;
      }
    });
  }

  private fill(fields: Record<string, unknown>): string {
    const missing = this.placeholders.filter((name) => !(name in fields));
    if (missing.length > 0) {
      const have = Object.keys(fields).sort().join(", ") || "none";
      throw new TemplateError(
        `user_template ${pyRepr(this.userTemplate)} needs field(s) ${missing.join(", ")} but the ` +
          `input has: ${have}; change the template's placeholders or the input's fields`,
      );
    }
    return this.#pieces.map((p) => ("field" in p ? pyStr(fields[p.field]) : p.literal)).join("");
  }
}

/** A task input as template fields: an object as is, any other value as `{input}`. */
export function taskFields(taskInput: unknown): Record<string, unknown> {
  return isPlainObject(taskInput) ? { ...taskInput } : { input: taskInput };
}

/** Demos as the text of the `demos` component: a JSON list of `{input, output}` (as Python writes it). */
export function demosToText(demos: readonly Demo[]): string {
  return pyDumps(demos.map((d) => ({ input: d.input, output: d.output })), { ensureAscii: false, indent: 1 });
}

/** Parse the `demos` component; a `TemplateError` saying what is wrong with it. */
export function demosFromText(text: string): Demo[] {
  if (text.trim() === "") return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new TemplateError(
      `component ${pyRepr(DEMOS_COMPONENT)} is not valid JSON (${(err as Error).message}); ` +
        'it must be a list like [{"input": ..., "output": "..."}]',
    );
  }
  if (!Array.isArray(raw)) {
    throw new TemplateError(
      `component ${pyRepr(DEMOS_COMPONENT)} must be a JSON list of {"input", "output"} objects, got ${typeName(raw)}`,
    );
  }
  return raw.map((item, i) => checkDemo(item, `component ${pyRepr(DEMOS_COMPONENT)} item ${i}`, true));
}

function checkDemo(item: unknown, where: string, wire = false): Demo {
  const hint = wire ? '; each item is {"input": ..., "output": "..."}' : "";
  if (!isPlainObject(item)) throw new TemplateError(`${where}: must be an object${hint}`);
  const extra = Object.keys(item).filter((k) => k !== "input" && k !== "output");
  if (extra.length > 0) throw new TemplateError(`${where}: ${extra[0]}: Extra inputs are not permitted${hint}`);
  if (!("input" in item)) throw new TemplateError(`${where}: input: Field required${hint}`);
  if (!("output" in item)) throw new TemplateError(`${where}: output: Field required${hint}`);
  if (typeof item.output !== "string") throw new TemplateError(`${where}: output: Input should be a valid string${hint}`);
  return Object.freeze({ input: item.input, output: item.output });
}

const IDENTIFIER = /^[\p{XID_Start}_]\p{XID_Continue}*$/u;

/** Split a user template into literal text and `{field}` pieces (`{{` and `}}` are braces). */
function parseTemplate(template: string): Piece[] {
  if (typeof template !== "string") throw new TemplateError("userTemplate must be a string");
  const pieces: Piece[] = [];
  let literal = "";
  for (let i = 0; i < template.length; i++) {
    const ch = template[i];
    if ((ch === "{" || ch === "}") && template[i + 1] === ch) {
      literal += ch;
      i++;
    } else if (ch === "}") {
      throw invalid(template, "Single '}' encountered in format string");
    } else if (ch === "{") {
      const end = template.indexOf("}", i);
      if (end < 0) throw invalid(template, "expected '}' before end of string");
      const name = template.slice(i + 1, end);
      if (!IDENTIFIER.test(name)) {
        throw new TemplateError(
          `user_template placeholder {${name}} must be a plain field name such as {question}; ` +
            "positional {}, conversions, format specs and attribute or index access are not allowed",
        );
      }
      if (literal) pieces.push({ literal });
      literal = "";
      pieces.push({ field: name });
      i = end;
    } else {
      literal += ch;
    }
  }
  if (literal) pieces.push({ literal });
  return pieces;
}

function invalid(template: string, reason: string): TemplateError {
  return new TemplateError(
    `user_template ${pyRepr(template)} is not a valid format string (${reason}); write literal braces as {{ and }}`,
  );
}
