/**
 * The program fingerprint: what makes a cached rollout result still valid. The same algorithm
 * as the Python SDK (container/fingerprint.py): sha256 over the canonical JSON (sorted keys,
 * no spaces, ASCII escapes) of the protocol version, the target id, kind, version, baseline
 * and user template, the target function's source and its file's source, every dataset row,
 * the splits and the verifier's spec. The candidate is not in it (the optimizer's cache key
 * adds it), nor is the rollout policy. A baseline read from a prompt file or the prompt registry
 * enters as where it is read from, not as its text: no rollout depends on it, so a new version
 * of the prompt keeps every cached rollout.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import type { Dataset } from "./dataset.js";
import { PROTOCOL } from "./protocol.js";
import { pyDumps } from "./python.js";
import type { Splits } from "./splits.js";
import type { Target } from "./target.js";
import { taskRow } from "./task.js";
import type { Verifier } from "./verifiers.js";

/** The hex sha256 fingerprint of a served program. */
export function computeFingerprint(target: Target, dataset: Dataset, splits: Splits, verifier: Verifier): string {
  return fingerprintOf({
    protocol: PROTOCOL,
    target: {
      id: target.id,
      kind: target.kind,
      version: target.version,
      baseline: target.baselineSource !== null ? { source: target.baselineSource } : { ...target.baseline },
      user_template: target.template ? target.template.userTemplate : null,
    },
    target_source: target.fn.toString(),
    module_source: sourceOf(target.moduleFile),
    dataset: dataset.tasks.map(taskRow),
    splits: { train: splits.train, val: splits.val, holdout: splits.holdout },
    verifier: verifier.spec,
  });
}

/** sha256 of the canonical JSON of `parts`, as Python's `json.dumps(sort_keys=True, separators=(",", ":"))`. */
export function fingerprintOf(parts: Record<string, unknown>): string {
  const canonical = pyDumps(parts, { sortKeys: true, separators: [",", ":"] });
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

function sourceOf(file: string): string {
  if (!file) return "";
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}
