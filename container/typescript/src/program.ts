/** One served program: a target with its dataset, splits and verifier, and its `GET /program` body. */

import { servedWarnings } from "./checks.js";
import { Dataset, loadDataset } from "./dataset.js";
import { UserError } from "./errors.js";
import { computeFingerprint } from "./fingerprint.js";
import { PROTOCOL, type Program } from "./protocol.js";
import { pyRepr } from "./python.js";
import { loadSplits, type Splits } from "./splits.js";
import { componentDescription, resolveBaseline, type Target } from "./target.js";
import { DEMOS_COMPONENT, SYSTEM_COMPONENT } from "./template.js";
import { loadVerifier, type Verifier, type VerifierLike } from "./verifiers.js";

/**
 * Everything a container needs to answer `/program` and `/rollout`. `warnings` are what the
 * user should hear before optimizing (an empty holdout split, rows that every rollout would
 * refuse): printed at start, served as `metadata.warnings`.
 */
export interface ServedProgram {
  readonly target: Target;
  readonly dataset: Dataset;
  readonly splits: Splits;
  readonly verifier: Verifier;
  readonly program: Program;
  readonly warnings: readonly string[];
}

/** What to serve a target with; each defaults to the target's own, as in the Python SDK. */
export interface ServeOptions {
  /** A dataset path or a loaded `Dataset` (default: the target's `dataset`). */
  dataset?: Dataset | string | null;
  /** A splits file or `Splits` (default: the dataset's split files, else the stratified default). */
  splits?: Splits | string | null;
  /** Anything `loadVerifier` takes (default: the target's, else `normalized`). */
  verifier?: VerifierLike | null;
}

/** Load what is given as paths and fill the defaults; errors show now, at startup. */
export async function buildServedProgram(given: Target, options: ServeOptions = {}): Promise<ServedProgram> {
  const target = await resolveBaseline(given);
  const source = options.dataset ?? target.dataset;
  if (source === null || source === undefined) {
    throw new UserError(`target ${pyRepr(target.id)} has no dataset; pass --dataset PATH or optimize({ dataset })`);
  }
  const dataset = source instanceof Dataset ? source : loadDataset(source);
  const splits = typeof options.splits === "object" && options.splits !== null ? options.splits : loadSplits(dataset, options.splits);
  const verifier = await loadVerifier(options.verifier ?? target.verifier);
  const warnings = servedWarnings(dataset, splits, verifier, target.template);
  const program: Program = {
    protocol: PROTOCOL,
    program_id: target.id,
    fingerprint: computeFingerprint(target, dataset, splits, verifier),
    description: target.description,
    components: Object.entries(target.baseline).map(([name, text]) => ({
      name,
      kind: target.kind,
      description: componentDescription(target, name),
      text,
    })),
    seeds: { train: [...splits.train], val: [...splits.val], holdout: [...splits.holdout] },
    objectives: ["reward", ...Object.entries(target.objectives).map(([name, direction]) => ({ name, direction }))],
    metadata: metadata(target, dataset.size, verifier.name, warnings),
    reward_range: [0, 1],
  };
  return Object.freeze({ target, dataset, splits, verifier, program, warnings: Object.freeze(warnings) });
}

function metadata(target: Target, size: number, verifier: string, warnings: string[]): Record<string, unknown> {
  const data: Record<string, unknown> = { dataset_size: size, verifier };
  if (target.template !== null) {
    data["template"] = {
      user_template: target.template.userTemplate,
      instruction_component: SYSTEM_COMPONENT,
      demos_component: DEMOS_COMPONENT,
    };
  }
  if (warnings.length > 0) data["warnings"] = warnings;
  return data;
}
