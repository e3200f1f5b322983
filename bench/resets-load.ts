/**
 * A bounded load of mixed requests over a fixed number of keep-alive connections, counting per
 * request kind what came back: each status, and each socket error (a reset instead of an answer).
 * Runs under Node, so the clients are the ones Node users have: an `http.Agent` with keepAlive, or
 * Node's fetch (undici). bench/resets.ts runs it against local edges; test/connection-resets.test.ts
 * runs it against the test stack.
 *
 *     const report = await runLoad({ baseUrl, apiKey, client: "agent", total: 10_000, connections: 32 });
 *     console.log(formatReport(report));
 */
import http from "node:http";
import { LIMITS, SHARED_ALIAS } from "../contract/limits.ts";

export type LoadClient = "agent" | "fetch";

export interface RequestKind {
  name: string;
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  /** Sent without Content-Length (chunked), so the edge learns its size only by reading it. */
  chunked?: boolean;
  /** The statuses a correct edge answers this request with. */
  expected: number[];
}

export interface KindReport {
  sent: number;
  statuses: Record<string, number>;
  /** Socket errors by code; with the agent client, also by the kind of the previous request on that socket. */
  errors: Record<string, number>;
  /** Answers whose status is not in `expected`. */
  unexpected: number;
}

export interface LoadReport {
  client: LoadClient;
  connections: number;
  sent: number;
  ms: number;
  /** TCP connections the agent opened (null for fetch, which does not say). */
  socketsOpened: number | null;
  kinds: Record<string, KindReport>;
}

export interface LoadOptions {
  baseUrl: string;
  apiKey: string;
  client: LoadClient;
  total: number;
  connections: number;
  /** No request is started after this many milliseconds (the run's bound whatever `total` says). */
  maxMs?: number;
  /** Only these kinds (by name), to vary one factor at a time. */
  only?: string[];
}

const utf8 = (text: string) => new TextEncoder().encode(text);

/** Every kind of request in the mix: answered after the body was read, answered before it, and GETs. */
export function requestKinds(apiKey: string): RequestKind[] {
  const auth = { authorization: `Bearer ${apiKey}` };
  const json = { "content-type": "application/json" };
  const decision = JSON.stringify({
    model: SHARED_ALIAS,
    state: { ticket: "I was charged twice for the same order last week and would like one of the payments refunded." },
    questions: {
      refund: { type: "noul", instructions: "Is the customer asking for money back?" },
      urgency: { type: "score", instructions: "How urgent is this ticket?", criteria: ["low", "medium", "high"] },
    },
  });
  // A decision is answered 200, or 529 while the one local lane is busy with the others.
  const decided = [200, 529];
  const oversized = new Uint8Array(LIMITS.decisionBodyBytes + 1).fill(0x20);
  return [
    { name: "decision", method: "POST", path: "/v1/systemone", headers: { ...auth, ...json }, body: utf8(decision), expected: decided },
    { name: "wrong content type", method: "POST", path: "/v1/systemone", headers: { ...auth, "content-type": "text/plain" }, body: utf8(decision), expected: decided },
    { name: "one-byte multipart", method: "POST", path: "/v1/systemone", headers: { ...auth, "content-type": "multipart/form-data; boundary=x" }, body: utf8("a"), expected: [422] },
    {
      name: "unknown question type",
      method: "POST",
      path: "/v1/systemone",
      headers: { ...auth, ...json },
      body: utf8(JSON.stringify({ model: SHARED_ALIAS, state: { a: 1 }, questions: { q: { type: "essay", instructions: "Say more." } } })),
      expected: [422],
    },
    { name: "malformed JSON", method: "POST", path: "/v1/systemone", headers: { ...auth, ...json }, body: utf8('{"model": "svc-shared", "state": {'), expected: [422] },
    { name: "not UTF-8", method: "POST", path: "/v1/systemone", headers: { ...auth, ...json }, body: new Uint8Array([...utf8('{"model": "'), 0xff, 0xfe, ...utf8('"}')]), expected: [422] },
    { name: "oversized", method: "POST", path: "/v1/systemone", headers: { ...auth, ...json }, body: oversized, expected: [422] },
    { name: "oversized chunked", method: "POST", path: "/v1/systemone", headers: { ...auth, ...json }, body: oversized, chunked: true, expected: [422] },
    { name: "unauthenticated", method: "POST", path: "/v1/systemone", headers: { ...json }, body: utf8(decision), expected: [401] },
    { name: "malformed key", method: "POST", path: "/v1/systemone", headers: { authorization: "Bearer not-a-key", ...json }, body: utf8(decision), expected: [401] },
    { name: "unknown route", method: "POST", path: "/v1/unknown", headers: { ...auth, ...json }, body: utf8(decision), expected: [404] },
    { name: "GET /v1/models", method: "GET", path: "/v1/models", headers: { ...auth }, expected: [200] },
    { name: "GET /", method: "GET", path: "/", headers: {}, expected: [200] },
  ];
}

/** Sends `total` requests, the kinds in turn, from `connections` concurrent senders; never throws for a failed request. */
export async function runLoad(opts: LoadOptions): Promise<LoadReport> {
  const kinds = requestKinds(opts.apiKey).filter((kind) => !opts.only || opts.only.includes(kind.name));
  if (kinds.length === 0) throw new Error(`no request kind named ${opts.only?.join(", ")}`);
  const report: LoadReport = { client: opts.client, connections: opts.connections, sent: 0, ms: 0, socketsOpened: null, kinds: {} };
  for (const kind of kinds) report.kinds[kind.name] = { sent: 0, statuses: {}, errors: {}, unexpected: 0 };
  const agent = opts.client === "agent" ? new CountingAgent(opts.connections) : undefined;
  const started = performance.now();
  const deadline = started + (opts.maxMs ?? 120_000);
  let next = 0;
  const sender = async () => {
    while (next < opts.total && performance.now() < deadline) {
      const kind = kinds[next++ % kinds.length]!;
      const tally = report.kinds[kind.name]!;
      tally.sent++;
      report.sent++;
      const outcome = agent ? await sendWithAgent(agent, opts.baseUrl, kind) : await sendWithFetch(opts.baseUrl, kind);
      if ("error" in outcome) {
        tally.errors[outcome.error] = (tally.errors[outcome.error] ?? 0) + 1;
      } else {
        tally.statuses[outcome.status] = (tally.statuses[outcome.status] ?? 0) + 1;
        if (!kind.expected.includes(outcome.status)) tally.unexpected++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, sender));
  report.ms = Math.round(performance.now() - started);
  if (agent) {
    report.socketsOpened = agent.opened;
    agent.destroy();
  }
  return report;
}

/** Socket errors across all kinds. */
export function socketErrors(report: LoadReport): number {
  return Object.values(report.kinds).reduce((sum, kind) => sum + Object.values(kind.errors).reduce((a, b) => a + b, 0), 0);
}

export function formatReport(report: LoadReport): string {
  const lines = [
    `${report.client} client, ${report.connections} connections: ${report.sent} requests in ${report.ms} ms, ${socketErrors(report)} socket errors` +
      (report.socketsOpened === null ? "" : `, ${report.socketsOpened} connections opened`),
  ];
  for (const [name, kind] of Object.entries(report.kinds)) {
    const errors = Object.entries(kind.errors).map(([what, n]) => `${what}: ${n}`).join(", ");
    lines.push(`  ${name.padEnd(22)} sent ${String(kind.sent).padStart(5)}  statuses ${JSON.stringify(kind.statuses)}${kind.unexpected ? `  UNEXPECTED ${kind.unexpected}` : ""}${errors ? `  errors {${errors}}` : ""}`);
  }
  return lines.join("\n");
}

type Outcome = { status: number } | { error: string };

/** The longest one request may take: a decision may wait for its lane before it answers. */
const REQUEST_TIMEOUT_MS = LIMITS.laneWaitMs + 10_000;

/** A keep-alive agent that counts the connections it opens and remembers which kind each socket carried last. */
class CountingAgent extends http.Agent {
  opened = 0;
  readonly lastKind = new WeakMap<object, string>();
  constructor(connections: number) {
    super({ keepAlive: true, maxSockets: connections });
  }
  override createConnection(...args: Parameters<http.Agent["createConnection"]>): ReturnType<http.Agent["createConnection"]> {
    this.opened++;
    return super.createConnection(...args);
  }
}

function sendWithAgent(agent: CountingAgent, baseUrl: string, kind: RequestKind): Promise<Outcome> {
  const url = new URL(kind.path, baseUrl);
  return new Promise((resolve) => {
    const headers: Record<string, string> = { ...kind.headers };
    if (kind.body && !kind.chunked) headers["content-length"] = String(kind.body.byteLength);
    let previous = "a new connection";
    const req = http.request(url, { method: kind.method, agent, headers, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0 }));
      res.on("error", (err: NodeJS.ErrnoException) => resolve({ error: `${err.code ?? err.message} (after ${previous})` }));
    });
    req.on("socket", (socket) => {
      previous = agent.lastKind.get(socket) ?? previous;
      agent.lastKind.set(socket, kind.name);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ error: `${err.code ?? err.message} (after ${previous})` }));
    if (kind.body && kind.chunked) {
      // Two writes without Content-Length: Node sends chunked encoding.
      const half = kind.body.byteLength >> 1;
      req.write(kind.body.subarray(0, half));
      req.end(kind.body.subarray(half));
    } else {
      req.end(kind.body);
    }
  });
}

async function sendWithFetch(baseUrl: string, kind: RequestKind): Promise<Outcome> {
  try {
    const body = kind.body && kind.chunked ? new Blob([kind.body]).stream() : kind.body;
    const res = await fetch(new URL(kind.path, baseUrl), {
      method: kind.method,
      headers: kind.headers,
      body,
      // A stream body is sent chunked, which fetch allows only half-duplex.
      ...(kind.chunked ? { duplex: "half" } : {}),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    } as RequestInit);
    await res.arrayBuffer();
    return { status: res.status };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { error: cause?.code ?? cause?.message ?? (err as Error).name };
  }
}
