/**
 * A webhook receiver on loopback for tests: a real HTTP server that records every request (headers
 * and raw body) and answers each with the next planned answer (200 once the plan is used up): a
 * status, or "hang" (never answers: the sender's attempt times out or its process dies meanwhile).
 *
 *     const receiver = await startReceiver();
 *     receiver.plan(500, 200);
 *     const [first, second] = await receiver.waitFor(2);
 *     await receiver.close();
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  received: Received[];
  plan(...answers: (number | "hang")[]): void;
  /** Resolves with the requests once there are at least `count` of those `match` keeps; fails after `timeoutMs`. */
  waitFor(count: number, match?: (r: Received) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const answers: (number | "hang")[] = [];
  const hanging: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() });
      const answer = answers.shift() ?? 200;
      if (answer === "hang") {
        hanging.push(res);
        return;
      }
      res.writeHead(answer, { "content-type": "text/plain" }).end(answer < 300 ? "ok" : "no");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    plan: (...next) => answers.push(...next),
    async waitFor(count, match = () => true, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const kept = received.filter(match);
        if (kept.length >= count) return kept;
        if (Date.now() > deadline) throw new Error(`the receiver got ${kept.length} of ${count} webhooks in ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
