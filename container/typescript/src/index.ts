/**
 * gepa-container: wrap a Node agent as a `gepa-container/1` task container for the
 * gepa-runtime prompt optimizer, with the same protocol and semantics as the Python SDK.
 *
 *     import { optimize } from "gepa-container";
 *
 *     optimize({ id: "support-triage", baseline: "Route the ticket." }, async (task, candidate) => {
 *       return await callMyModel(candidate.text, String(task.input["text"]), candidate.model);
 *     });
 *
 * Serve it with `npx gepa-container serve ./agent.js --dataset tickets.jsonl`, or in code with
 * `(await createContainer(target, { dataset })).listen(8100)`. `baseline` may also be a prompt
 * file or a `prompts:/NAME@ALIAS` registry URI, which the application reads with `loadPrompt`.
 */

export { Container, createContainer, createHandler, type ContainerOptions } from "./app.js";
export { Dataset, loadDataset } from "./dataset.js";
export { GepaContainerError, RequestRejected, Retryable, TemplateError, UserError, UserMistake, type RetryableOptions } from "./errors.js";
export { faultStatus } from "./faults.js";
export { computeFingerprint } from "./fingerprint.js";
export { loadTarget } from "./loader.js";
export { buildServedProgram, type ServedProgram, type ServeOptions } from "./program.js";
export { PROTOCOL, type Program, type RolloutRequest, type RolloutResponse, type ErrorBody } from "./protocol.js";
export { AgentResult, Score, type AgentResultInit, type AgentTrace, type AgentUsage } from "./results.js";
export { defaultSplits, loadSplits, splitOf, type Splits } from "./splits.js";
export {
  COMPONENT_KINDS,
  Registry,
  clearOptimizationTargets,
  defaultRegistry,
  getOptimizationTarget,
  listOptimizationTargets,
  optimize,
  resolveBaseline,
  type ComponentKind,
  type OptimizeOptions,
  type Target,
  type TargetFn,
} from "./target.js";
export { Candidate, taskFieldsOf, type SplitName, type Task } from "./task.js";
export { isRegistryUri, parseRegistryUri, readPromptFile, type RegistryRef } from "./promptfile.js";
export { loadComponents, loadPrompt, type LoadOptions } from "./prompts.js";
export { PromptTemplate, type ChatMessage, type Demo } from "./template.js";
export { RolloutSpan, RolloutTracer, spanEvent, tracingFromEnv, type ExportSettings } from "./tracing.js";
export { normalizeText } from "./text.js";
export { loadVerifier, Verifier, type VerifierFn, type VerifierLike } from "./verifiers.js";
