/**
 * The student model: one chat completion against any OpenAI-compatible endpoint, with `fetch`.
 *
 * Settings come from `OPENAI_BASE_URL` (default OpenAI's), `OPENAI_API_KEY` and
 * `GEPA_STUDENT_MODEL`; the default model is `student` (the alias of `gepa-runtime models
 * serve`) for a local endpoint or without a key, else `gpt-4o-mini`, as in the Python example.
 * A rate limit or a 5xx becomes a `Retryable` (429/503 with `Retry-After`), which the optimizer
 * retries and never scores; a dropped connection or a timeout propagates and the SDK answers
 * 503. There are no client-side retries: the optimizer does them.
 */

import { Retryable } from "gepa-container";

export interface StudentSettings {
  baseUrl: string;
  apiKey: string;
  model: string;
  temperature: number;
  maxTokens: number;
  timeoutMs: number;
}

/** A chat message. */
export interface Message {
  role: "system" | "user" | "assistant";
  content: string;
}

/** What one completion gave. */
export interface Completion {
  content: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
}

const LOCAL_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"];

/** The student settings from the environment. */
export function studentFromEnv(env: NodeJS.ProcessEnv = process.env): StudentSettings {
  const apiKey = env["OPENAI_API_KEY"] ?? "";
  const baseUrl = (env["OPENAI_BASE_URL"] || "https://api.openai.com/v1").replace(/\/+$/, "");
  const local = LOCAL_HOSTS.includes(new URL(baseUrl).hostname);
  const model = env["GEPA_STUDENT_MODEL"] || (apiKey && !local ? "gpt-4o-mini" : "student");
  return { baseUrl, apiKey: apiKey || "local", model, temperature: 0, maxTokens: 20, timeoutMs: 120_000 };
}

/** One chat completion; `model` overrides the settings' (a rollout's `policy.model`). */
export async function complete(settings: StudentSettings, messages: Message[], model?: string | null): Promise<Completion> {
  const response = await fetch(`${settings.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${settings.apiKey}` },
    body: JSON.stringify({ model: model ?? settings.model, messages, temperature: settings.temperature, max_tokens: settings.maxTokens }),
    signal: AbortSignal.timeout(settings.timeoutMs),
  });
  if (response.status === 429 || response.status >= 500) {
    const retryAfter = Number(response.headers.get("retry-after")) || null;
    throw new Retryable(`student endpoint answered ${response.status}: ${(await response.text()).slice(0, 200)}`, {
      rateLimited: response.status === 429,
      retryAfter,
    });
  }
  if (!response.ok) throw new Error(`student endpoint answered ${response.status}: ${(await response.text()).slice(0, 500)}`);
  const body = (await response.json()) as {
    model?: string;
    choices?: { message?: { content?: string | null } }[];
    usage?: { prompt_tokens?: number; completion_tokens?: number };
  };
  return {
    content: body.choices?.[0]?.message?.content ?? "",
    model: body.model ?? model ?? settings.model,
    inputTokens: body.usage?.prompt_tokens ?? 0,
    outputTokens: body.usage?.completion_tokens ?? 0,
  };
}
