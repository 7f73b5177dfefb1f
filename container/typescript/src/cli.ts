#!/usr/bin/env node
/**
 * `gepa-container serve FILE[:TARGET]`: serve an `optimize(...)` target over HTTP, as the
 * Python SDK's `gepa-runtime container` does.
 *
 * Every flag has an environment variable: `GEPA_DATASET`, `GEPA_VERIFIER`, `GEPA_SPLITS_FILE`,
 * `GEPA_CONTAINER_HOST`, `GEPA_CONTAINER_PORT` and `GEPA_CONTAINER_TOKEN`. Once the socket
 * listens, one line `serving <id> on http://host:port` goes to stdout (with the real port when
 * `--port 0`). What the program warns about (an empty holdout split, rows every rollout would
 * refuse) goes to stderr first, one `warning:` line each. Exit codes: 2 with a message for a mistake in flags, files or the agent; 0 when
 * stopped by SIGTERM/SIGINT.
 */

import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { createContainer } from "./app.js";
import { UserError } from "./errors.js";
import { loadTarget } from "./loader.js";

const USAGE = `usage: gepa-container serve FILE[:TARGET] [--dataset PATH] [--verifier V] [--splits-file PATH]
                             [--host HOST] [--port PORT] [--token TOKEN] [--max-body-bytes N]

Serve an optimize(...) target as a gepa-container/1 task container.

  FILE[:TARGET]       the agent's .js/.mjs file; TARGET (an id or export) if it registers several
  --dataset PATH      JSONL/JSON/CSV file or folder (default: the target's dataset)   [GEPA_DATASET]
  --verifier V        verifier JSON file, built-in name or file.js:export (default: normalized)
                                                                                  [GEPA_VERIFIER]
  --splits-file PATH  JSON {"train": [...], "val": [...], "holdout": [...]}       [GEPA_SPLITS_FILE]
  --host HOST         address to bind (default 127.0.0.1)                   [GEPA_CONTAINER_HOST]
  --port PORT         port to listen on; 0 picks a free one (default 8100)  [GEPA_CONTAINER_PORT]
  --token TOKEN       require Authorization: Bearer TOKEN on /program and /rollout
                                                                          [GEPA_CONTAINER_TOKEN]
  --max-body-bytes N  refuse larger POST /rollout bodies with 413 (default 1000000)`;

/** Run the CLI with `argv` (without `node` and the script); resolves when the server stops. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (args.values.help || args.positionals.length === 0) {
    (args.values.help ? process.stdout : process.stderr).write(USAGE + "\n");
    return args.values.help ? 0 : 2;
  }
  const [command, spec, ...rest] = args.positionals;
  if (command !== "serve" || spec === undefined || rest.length > 0) {
    process.stderr.write(`error: expected "serve FILE[:TARGET]", got ${JSON.stringify(args.positionals.join(" "))}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    return await serve(spec, args.values, env);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    return 2;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dataset: { type: "string" },
      verifier: { type: "string" },
      "splits-file": { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      token: { type: "string" },
      "max-body-bytes": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}

type Flags = ReturnType<typeof parse>["values"];

async function serve(spec: string, flags: Flags, env: NodeJS.ProcessEnv): Promise<number> {
  const host = flags.host ?? env["GEPA_CONTAINER_HOST"] ?? "127.0.0.1";
  const port = integer("--port / GEPA_CONTAINER_PORT", flags.port ?? env["GEPA_CONTAINER_PORT"] ?? "8100", 65535);
  const maxBodyBytes = integer("--max-body-bytes", flags["max-body-bytes"] ?? "1000000", Number.MAX_SAFE_INTEGER);
  const target = await loadTarget(spec);
  const container = await createContainer(target, {
    dataset: flags.dataset ?? env["GEPA_DATASET"] ?? null,
    verifier: flags.verifier ?? env["GEPA_VERIFIER"] ?? null,
    splits: flags["splits-file"] ?? env["GEPA_SPLITS_FILE"] ?? null,
    token: flags.token ?? env["GEPA_CONTAINER_TOKEN"] ?? null,
    maxBodyBytes,
  });
  for (const warning of container.served.warnings) process.stderr.write(`warning: ${target.id}: ${warning}\n`);
  let url: string;
  try {
    url = await container.listen(port, host);
  } catch (err) {
    throw new UserError(`could not listen on ${host}:${port}: ${(err as Error).message}`);
  }
  process.stdout.write(`serving ${target.id} on ${url}\n`);
  await stopSignal();
  await container.close();
  return 0;
}

function integer(flag: string, raw: string, max: number): number {
  if (!/^\d+$/.test(raw.trim())) throw new UserError(`${flag} must be a number, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value > max) throw new UserError(`${flag} must be in 0..${max}, got ${value}`);
  return value;
}

function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
}

function isEntryPoint(): boolean {
  try {
    return realpathSync(process.argv[1] ?? "") === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
