/**
 * Fakes of the decision service's HTTP front, for client tests of answers the real stack cannot give
 * on demand (a full lane's 529, a 503, a 504, a hang, a dropped connection, a redirect) and for
 * counting what a client does on the wire (attempts, concurrent connections). Each is a loopback
 * server that says in its name what it fakes; none computes anything.
 *
 *     const fake = await fakeServiceAnswering(529, { "retry-after-ms": "10" });
 *     await client(fake.url).systemOne(...);   // -> OverloadedError after 1 + maxRetries attempts
 *     fake.requests;                           // how many arrived
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { errorBody, type ErrorCode } from "../../contract/errors.ts";
import { REQUEST_ID_HEADER } from "../../contract/limits.ts";
import { listen } from "./fake-server.ts";

export interface Fake {
  url: string;
  /** Requests that arrived. */
  requests: number;
  stop(): Promise<void>;
}

const CODES: Record<number, ErrorCode> = { 503: "unavailable", 504: "timeout", 529: "lane_full" };

async function fake(handle: (req: IncomingMessage, res: ServerResponse, n: number) => void, onArrival?: (req: IncomingMessage) => void): Promise<Fake> {
  const counter = { requests: 0 };
  const server = await listen((req, res) => {
    counter.requests++;
    onArrival?.(req);
    // The body is read first, as the real service does, so a client's send always completes.
    req.resume();
    req.on("end", () => handle(req, res, counter.requests));
  });
  return {
    url: server.url,
    get requests() {
      return counter.requests;
    },
    stop: server.stop,
  };
}

/** Answers every request with `status` and the service's error envelope (503, 504 or 529), and `headers`. */
export function fakeServiceAnswering(status: 503 | 504 | 529, headers: Record<string, string> = {}): Promise<Fake> {
  return fake((_req, res, n) => {
    res.writeHead(status, { "content-type": "application/json", [REQUEST_ID_HEADER]: `req_fake${n}`, ...headers });
    res.end(JSON.stringify(errorBody(CODES[status]!, `fake ${status}`)));
  });
}

/** Reads each request and never answers it. */
export function fakeServiceHanging(): Promise<Fake> {
  return fake(() => {});
}

/** Reads each request, then closes the connection without a response. */
export function fakeServiceDroppingConnections(): Promise<Fake> {
  return fake((req) => req.socket.destroy());
}

/** Answers every request with a redirect to `location`. */
export function fakeServiceRedirecting(status: 301 | 302 | 307 | 308, location: string): Promise<Fake> {
  return fake((_req, res) => {
    res.writeHead(status, { location });
    res.end();
  });
}

/**
 * Answers every request with `{}` after `delayMs`, counting the connections open at once (from a
 * connection's first request to its close) and the requests in flight at once, highest values kept.
 */
export async function fakeServiceCountingConnections(delayMs: number): Promise<Fake & { maxSockets: number; maxInFlight: number }> {
  const open = new Set<Socket>();
  const seen = new WeakSet<Socket>();
  const count = { inFlight: 0, maxInFlight: 0, maxSockets: 0 };
  const base = await fake(
    (_req, res) => {
      setTimeout(() => {
        count.inFlight--;
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      }, delayMs);
    },
    (req) => {
      count.maxInFlight = Math.max(count.maxInFlight, ++count.inFlight);
      const socket = req.socket;
      if (seen.has(socket)) return;
      seen.add(socket);
      open.add(socket);
      count.maxSockets = Math.max(count.maxSockets, open.size);
      socket.on("close", () => open.delete(socket));
    },
  );
  return {
    url: base.url,
    stop: base.stop,
    get requests() {
      return base.requests;
    },
    get maxSockets() {
      return count.maxSockets;
    },
    get maxInFlight() {
      return count.maxInFlight;
    },
  };
}
