/**
 * Read a version of MLflow's prompt registry over its REST API, as the Python SDK does
 * (container/prompt_registry.py): a prompt is a registered model whose versions carry their
 * text in the tag `mlflow.prompt.text`. The server is `GEPA_MLFLOW_TRACKING_URI` or
 * `MLFLOW_TRACKING_URI` (http or https), with `MLFLOW_TRACKING_TOKEN` (bearer) or
 * `MLFLOW_TRACKING_USERNAME`/`MLFLOW_TRACKING_PASSWORD` (basic) when it needs them.
 */

import { UserError } from "./errors.js";
import type { RegistryRef } from "./promptfile.js";

export const PROMPT_TEXT_TAG = "mlflow.prompt.text";
const URI_ENVS = ["GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI"];
const TIMEOUT_MS = 30_000;

/** One prompt version: its text, its number and its tags. */
export interface RegistryPrompt {
  readonly ref: RegistryRef;
  readonly text: string;
  readonly version: number;
  readonly tags: Readonly<Record<string, string>>;
}

/** The tracking server to read prompts from; a `UserError` naming the variable when unset. */
export function registryUri(env: NodeJS.ProcessEnv = process.env): string {
  const uri = URI_ENVS.map((name) => env[name]).find((value) => value);
  if (!uri) {
    throw new UserError(
      "a prompts:/ baseline needs the MLflow tracking server that holds the prompt: set MLFLOW_TRACKING_URI=http://HOST:PORT " +
        "(or load the prompt from a file exported with `gepa-runtime runs export RUN_ID --prompt-file PATH`)",
    );
  }
  if (!/^https?:\/\//.test(uri)) {
    throw new UserError(`MLFLOW_TRACKING_URI='${uri}': prompts are read from a tracking server over HTTP; point it at http(s)://HOST:PORT, or export the prompt to a file`);
  }
  return uri.replace(/\/+$/, "");
}

function headers(env: NodeJS.ProcessEnv): Record<string, string> {
  if (env["MLFLOW_TRACKING_TOKEN"]) return { Authorization: `Bearer ${env["MLFLOW_TRACKING_TOKEN"]}` };
  if (env["MLFLOW_TRACKING_USERNAME"]) {
    const pair = `${env["MLFLOW_TRACKING_USERNAME"]}:${env["MLFLOW_TRACKING_PASSWORD"] ?? ""}`;
    return { Authorization: `Basic ${Buffer.from(pair).toString("base64")}` };
  }
  return {};
}

/** The version `ref` names; a `UserError` saying what to fix when it cannot be read. */
export async function fetchPrompt(ref: RegistryRef, env: NodeJS.ProcessEnv = process.env): Promise<RegistryPrompt> {
  const base = registryUri(env);
  const query =
    ref.alias !== null
      ? `registered-models/alias?${new URLSearchParams({ name: ref.name, alias: ref.alias })}`
      : `model-versions/get?${new URLSearchParams({ name: ref.name, version: String(ref.version) })}`;
  let response: Response;
  try {
    response = await fetch(`${base}/api/2.0/mlflow/${query}`, { headers: headers(env), signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    const cause = (err as { cause?: Error }).cause ?? (err as Error);
    throw new UserError(`cannot read ${ref.uri} from the MLflow server at ${base} (${cause.message}); start it or fix MLFLOW_TRACKING_URI`);
  }
  const body = (await response.json().catch(() => ({}))) as { error_code?: string; model_version?: Record<string, unknown> };
  if (response.status === 404 || body.error_code === "RESOURCE_DOES_NOT_EXIST") {
    throw new UserError(
      `${ref.uri} is not in the prompt registry at ${base}: register a version with \`gepa-runtime runs export RUN_ID --mlflow-prompt ${ref.name}\` ` +
        "(an alias is set when the run was promoted), or name an alias or version that exists",
    );
  }
  if (response.status === 401 || response.status === 403) {
    throw new UserError(`the MLflow server at ${base} refused to read ${ref.uri} (${response.status}): set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD`);
  }
  if (response.status !== 200) throw new UserError(`the MLflow server at ${base} answered ${response.status} for ${ref.uri}`);
  const version = body.model_version ?? {};
  const tags: Record<string, string> = {};
  for (const tag of (version["tags"] as { key: string; value: string }[] | undefined) ?? []) tags[String(tag.key)] = String(tag.value);
  const text = tags[PROMPT_TEXT_TAG];
  if (text === undefined) {
    throw new UserError(`${ref.uri} names a registered model, not a prompt (its version has no ${PROMPT_TEXT_TAG} tag); name a prompt of the prompt registry`);
  }
  return { ref, text, version: Number(version["version"] ?? 0), tags };
}
