/**
 * Mistakes in the served rows that are known before any rollout, and the warnings they give,
 * as in the Python SDK (container/checks.py).
 *
 * A row whose input lacks a field the user template names, or that has no expected value
 * under a verifier that compares with one, fails the same way on every rollout: the rollout
 * answers 422 (`UserMistake`) and the container says so at start (`servedWarnings`, shown on
 * stderr and as `metadata.warnings` of `GET /program`), so the optimizer's dry-run can report
 * it before any budget is spent. An empty holdout split is warned about the same way.
 */

import type { Dataset } from "./dataset.js";
import { UserMistake } from "./errors.js";
import { pyRepr } from "./python.js";
import type { Splits } from "./splits.js";
import { taskFieldsOf, type Task } from "./task.js";
import type { PromptTemplate } from "./template.js";
import { missingLabelFix, type Verifier } from "./verifiers.js";

const EXAMPLES = 5;

/** Why `task`'s input cannot fill `template`'s user template, or `null` if it can. */
export function templateProblem(template: PromptTemplate, task: Task): string | null {
  const fields = taskFieldsOf(task);
  const missing = template.placeholders.filter((name) => !(name in fields));
  if (missing.length === 0) return null;
  const have = Object.keys(fields).sort().join(", ") || "none";
  return (
    `user_template ${pyRepr(template.userTemplate)} needs field(s) ${missing.join(", ")} but ` +
    `the row has: ${have}; add the field(s) to the row or change the template's placeholders`
  );
}

/** Throw `UserMistake("TemplateMismatch")` when `task` cannot be rendered. */
export function checkRowFits(template: PromptTemplate | null, task: Task): void {
  if (template === null) return;
  const problem = templateProblem(template, task);
  if (problem !== null) throw new UserMistake("TemplateMismatch", `seed ${pyRepr(task.name)}: ${problem}`);
}

/** What a user should hear before optimizing: each line says what happens and the fix. */
export function servedWarnings(dataset: Dataset, splits: Splits, verifier: Verifier, template: PromptTemplate | null): string[] {
  const warnings: string[] = [];
  if (splits.holdout.length === 0) {
    warnings.push(
      "the holdout split is empty, so no lift can be measured on unseen seeds: name " +
        'holdout seeds in --splits-file ({"train": [...], "holdout": [...]}), add a ' +
        "holdout.jsonl file to the dataset folder, or serve more rows",
    );
  }
  const names = new Set([...splits.train, ...splits.val, ...splits.holdout]);
  const served = dataset.tasks.filter((t) => names.has(t.name));
  if (verifier.needsLabel) {
    const unlabelled = served.filter((t) => t.expected === null || t.expected === undefined).map((t) => t.name);
    if (unlabelled.length > 0) {
      warnings.push(
        `${unlabelled.length} of ${served.length} served seeds have no expected value ` +
          `(${examples(unlabelled)}); their rollouts answer 422: ${missingLabelFix(verifier.name)}`,
      );
    }
  }
  if (template !== null) {
    const bad = served.flatMap((t) => {
      const problem = templateProblem(template, t);
      return problem === null ? [] : [[t.name, problem] as const];
    });
    if (bad.length > 0) {
      warnings.push(
        `${bad.length} of ${served.length} served seeds cannot be rendered ` +
          `(${examples(bad.map(([name]) => name))}); their rollouts answer 422: ` +
          `seed ${pyRepr(bad[0]![0])}: ${bad[0]![1]}`,
      );
    }
  }
  return warnings;
}

function examples(names: string[]): string {
  const shown = names.slice(0, EXAMPLES).join(", ");
  return names.length > EXAMPLES ? `${shown}, ...` : shown;
}
