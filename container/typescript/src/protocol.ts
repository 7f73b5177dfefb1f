/**
 * Wire protocol `gepa-container/1` (the Python side's schemas/protocol.py is the reference;
 * `gepa-runtime schema` prints its JSON Schemas). Types of the bodies, and the validation of a
 * `POST /rollout` body with errors that name the field, as the Python SDK words them.
 */

import { isPlainObject } from "./python.js";

export const PROTOCOL = "gepa-container/1";

/** One mutable piece of the program's surface, with its baseline text. */
export interface Component {
  name: string;
  kind: string;
  description: string;
  text: string;
}

/** An objective the rollouts report, and which way is better (a plain name is maximised). */
export interface Objective {
  name: string;
  direction: "maximize" | "minimize";
}

/** Body of `GET /program`. */
export interface Program {
  protocol: string;
  program_id: string;
  fingerprint: string;
  description: string;
  components: Component[];
  seeds: { train: string[]; val: string[]; holdout: string[] };
  objectives: (string | Objective)[];
  metadata: Record<string, unknown>;
  /** [low, high]: every reward lies in it (the SDK's verifiers score in [0, 1]). */
  reward_range: [number, number];
}

/** Body of `POST /rollout`. */
export interface RolloutRequest {
  run_id: string;
  candidate_id: string;
  candidate: Record<string, string>;
  seed: string;
  policy: { model: string | null };
  return_trace: boolean;
}

/** Body of a `200` answer to `POST /rollout`. */
export interface RolloutResponse {
  reward: number;
  objectives: Record<string, number>;
  output: unknown;
  feedback: string;
  trace: { messages: unknown[]; tool_calls: unknown[]; events: unknown[] };
  usage: {
    input_tokens: number;
    output_tokens: number;
    /** Of `input_tokens`, those the provider served from its prompt cache. */
    cached_input_tokens: number;
    cost_usd: number;
    latency_ms: number;
    /** The student model that answered: the optimizer prices its tokens (when `cost_usd` is 0). */
    model: string | null;
  };
  error: string | null;
}

/** Body of every non-200 answer. */
export interface ErrorBody {
  error: { type: string; message: string };
}

const TRUE_WORDS = ["true", "t", "yes", "y", "on", "1"];
const FALSE_WORDS = ["false", "f", "no", "n", "off", "0"];

/** A validated rollout request, or the list of problems (`field: what is wrong`). */
export function parseRolloutRequest(data: unknown): RolloutRequest | string[] {
  if (!isPlainObject(data)) return ["body: Input should be a valid dictionary or instance of RolloutRequest"];
  const problems: string[] = [];
  const text = (key: string, fallback: string | undefined): string => {
    const value = data[key] === undefined ? fallback : data[key];
    if (value === undefined) problems.push(`${key}: Field required`);
    else if (typeof value !== "string") problems.push(`${key}: Input should be a valid string`);
    return typeof value === "string" ? value : "";
  };
  const runId = text("run_id", "");
  const candidateId = text("candidate_id", "");
  const candidate = data["candidate"];
  if (candidate === undefined) problems.push("candidate: Field required");
  else if (!isPlainObject(candidate)) problems.push("candidate: Input should be a valid dictionary");
  else {
    for (const [name, value] of Object.entries(candidate)) {
      if (typeof value !== "string") problems.push(`candidate.${name}: Input should be a valid string`);
    }
  }
  const seed = text("seed", undefined);
  if (typeof data["seed"] === "string" && seed.length === 0) problems.push("seed: String should have at least 1 character");
  const policy = data["policy"] === undefined ? {} : data["policy"];
  let model: string | null = null;
  if (!isPlainObject(policy)) problems.push("policy: Input should be a valid dictionary or instance of Policy");
  else if (policy["model"] !== undefined && policy["model"] !== null && typeof policy["model"] !== "string") {
    problems.push("policy.model: Input should be a valid string");
  } else model = (policy["model"] as string | null | undefined) ?? null;
  const returnTrace = bool(data["return_trace"], true);
  if (returnTrace === null) problems.push("return_trace: Input should be a valid boolean, unable to interpret input");
  if (problems.length > 0) return problems;
  return {
    run_id: runId,
    candidate_id: candidateId,
    candidate: candidate as Record<string, string>,
    seed,
    policy: { model },
    return_trace: returnTrace!,
  };
}

function bool(value: unknown, fallback: boolean): boolean | null {
  if (value === undefined) return fallback;
  if (typeof value === "boolean") return value;
  if (value === 0 || value === 1) return value === 1;
  if (typeof value === "string") {
    const word = value.toLowerCase();
    if (TRUE_WORDS.includes(word)) return true;
    if (FALSE_WORDS.includes(word)) return false;
  }
  return null;
}
