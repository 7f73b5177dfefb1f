/**
 * The HTTP server (`node:http`, no framework) that serves a target as a `gepa-container/1`
 * task container, answering as the Python SDK's Starlette app does (container/app.py).
 *
 * Routes: `GET /health` (open), `GET /program` and `POST /rollout` (bearer token when one is
 * set). Every non-200 answer has the body `{"error": {"type", "message"}}`; the mapping from
 * failures to status codes lives in faults.ts.
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { RequestRejected } from "./errors.js";
import { errorBody, errorKind, faultOf, faultStatus } from "./faults.js";
import { buildServedProgram, type ServedProgram, type ServeOptions } from "./program.js";
import { parseRolloutRequest, PROTOCOL, type RolloutRequest } from "./protocol.js";
import { pyRepr, pyStrip } from "./python.js";
import { runRollout } from "./rollout.js";
import type { Target } from "./target.js";
import { tracingFromEnv, type RolloutTracer } from "./tracing.js";

/** How to serve: the program's data plus the bearer token and the body limit. */
export interface ContainerOptions extends ServeOptions {
  /** Require `Authorization: Bearer <token>` on `/program` and `/rollout`. */
  token?: string | null;
  /** Larger `POST /rollout` bodies are refused with 413 (default 1,000,000 bytes). */
  maxBodyBytes?: number;
  /** Where failures are logged (default: stderr). */
  log?: (line: string) => void;
  /**
   * Where rollout spans go: `null` records none; unset, wherever `OTEL_EXPORTER_OTLP_*` point
   * (no such variable: none). See tracing.ts.
   */
  tracer?: RolloutTracer | null;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** A container ready to listen: its HTTP server and the program it serves. */
export class Container {
  constructor(
    readonly served: ServedProgram,
    readonly server: Server,
    readonly tracer: RolloutTracer | null = null,
  ) {}

  /** Listen on `host:port` (port 0 picks a free one); resolves to the base URL. */
  listen(port = 0, host = "127.0.0.1"): Promise<string> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        this.server.off("error", reject);
        const address = this.server.address() as AddressInfo;
        const shown = address.address.includes(":") ? `[${address.address}]` : address.address;
        resolve(`http://${shown}:${address.port}`);
      });
    });
  }

  /** Stop listening, close idle connections, and export the rollout spans still queued. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
    await this.tracer?.flush();
  }
}

/** A container serving `target`; paths are loaded now, so their errors show at startup. */
export async function createContainer(target: Target, options: ContainerOptions = {}): Promise<Container> {
  const served = await buildServedProgram(target, options);
  const tracer = options.tracer === undefined ? tracingFromEnv(process.env, options.log) : options.tracer;
  const handler = createHandler(served, { ...options, tracer });
  const server = createHttpServer((req, res) => void handler(req, res));
  return new Container(served, server, tracer);
}

/**
 * The request handler of a served program, to mount in a server of your own (with tracing on,
 * `await options.tracer.flush()` before the process exits: spans are exported in batches).
 */
export function createHandler(served: ServedProgram, options: ContainerOptions = {}): Handler {
  const expectedAuth = options.token ? digest(options.token) : null;
  const limit = options.maxBodyBytes ?? 1_000_000;
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const tracer = options.tracer === undefined ? tracingFromEnv(process.env, options.log) : options.tracer;
  const healthBody = { status: "ok", protocol: PROTOCOL };

  const authorize = (req: IncomingMessage): void => {
    if (expectedAuth === null) return;
    const header = req.headers.authorization ?? "";
    const space = header.indexOf(" ");
    const [scheme, credentials] = space < 0 ? [header, ""] : [header.slice(0, space), header.slice(space + 1)];
    // The scheme is case-insensitive (RFC 7235): "bearer x" is as good as "Bearer x".
    const given = scheme.toLowerCase() === "bearer" ? pyStrip(credentials) : "";
    if (!(given && timingSafeEqual(digest(given), expectedAuth))) {
      throw new RequestRejected(401, "Unauthorized", `${header ? "wrong" : "missing"} bearer token; send Authorization: Bearer <token>`, {
        "WWW-Authenticate": "Bearer",
      });
    }
  };

  const rollout = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let request: RolloutRequest;
    try {
      authorize(req);
      request = parse(await readBody(req, limit));
    } catch (err) {
      return sendFault(res, err);
    }
    try {
      sendJson(res, 200, await runRollout(served, request, tracer));
    } catch (err) {
      logFault(log, served.target.id, err);
      sendFault(res, err);
    }
  };

  const routes: Record<string, [string[], Handler]> = {
    "/health": [["HEAD", "GET"], async (_req, res) => sendJson(res, 200, healthBody)],
    "/program": [
      ["HEAD", "GET"],
      async (req, res) => {
        try {
          authorize(req);
        } catch (err) {
          return sendFault(res, err);
        }
        sendJson(res, 200, served.program);
      },
    ],
    "/rollout": [["POST"], rollout],
  };

  const dispatch: Handler = async (req, res) => {
    const method = req.method ?? "GET";
    const url = new URL(req.url ?? "/", "http://container");
    const route = routes[url.pathname];
    if (route === undefined) {
      const bare = url.pathname.replace(/\/+$/, "");
      if (bare !== url.pathname && routes[bare]) {
        res.writeHead(307, { location: bare + url.search, "content-length": "0" }).end();
        return;
      }
      return sendJson(res, 404, errorBody("HTTPError", `${method} ${url.pathname}: Not Found`));
    }
    const [methods, handle] = route;
    if (!methods.includes(method)) {
      const body = errorBody("HTTPError", `${method} ${url.pathname}: Method Not Allowed`);
      return sendJson(res, 405, body, { Allow: methods.join(", ") });
    }
    await handle(req, res);
  };

  return async (req, res) => {
    try {
      await dispatch(req, res);
    } catch (err) {
      log(`request ${req.method} ${req.url} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      if (!res.headersSent) sendFault(res, err);
      else res.destroy();
    }
  };
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** The body, refused with 413 past `limit` bytes (by Content-Length or while it streams). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers["content-length"];
  if (declared !== undefined) {
    const size = Number(declared);
    if (!/^\d+$/.test(declared)) return Promise.reject(new RequestRejected(400, "InvalidBody", "Content-Length is not a number"));
    if (size > limit) return Promise.reject(tooLarge(`body of ${size} bytes is over the limit of ${limit} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) {
        req.off("data", onData);
        req.resume(); // drain the rest without keeping it
        reject(tooLarge(`body is over the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function tooLarge(message: string): RequestRejected {
  return new RequestRejected(413, "PayloadTooLarge", message, { Connection: "close" });
}

function parse(body: Buffer): RolloutRequest {
  let data: unknown;
  try {
    data = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (err) {
    throw new RequestRejected(400, "InvalidBody", `body is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = parseRolloutRequest(data);
  if (Array.isArray(parsed)) throw new RequestRejected(400, "InvalidBody", `invalid rollout request: ${parsed.join("; ")}`);
  return parsed;
}

/** A crash with its stack; a user mistake or a retryable fault in one line. */
function logFault(log: (line: string) => void, targetId: string, err: unknown): void {
  const status = faultStatus(err)[0];
  const message = err instanceof Error ? err.message : String(err);
  if (status === 500) log(`rollout of ${pyRepr(targetId)} failed: ${err instanceof Error ? (err.stack ?? message) : message}`);
  else if (status < 500 && status !== 429) log(`rollout of ${pyRepr(targetId)} refused (${status} ${errorKind(err)}): ${message}`);
  else log(`rollout of ${pyRepr(targetId)}: retryable fault ${status}: ${message}`);
}

function sendFault(res: ServerResponse, err: unknown): void {
  const fault = faultOf(err);
  sendJson(res, fault.status, fault.body, fault.headers);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = Buffer.from(JSON.stringify(body), "utf8");
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": String(text.length) });
  res.end(res.req.method === "HEAD" ? undefined : text);
}
