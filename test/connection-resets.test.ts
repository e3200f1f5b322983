/**
 * Keep-alive connections to the edge survive every kind of answer. Miniflare's HTTP server ends a
 * connection whose request body the Worker left unread, without `Connection: close`, so a client that
 * reused it got ECONNRESET (about 28% of a mixed load at 32 connections); the edge now reads what a
 * handler left (server-shared/body.ts `discardBody`). bench/resets.ts runs the same load at 10,000
 * requests, also against the bundle under workerd alone.
 */
import net from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import { LIMITS } from "../contract/limits.ts";
import { formatReport, requestKinds, runLoad, socketErrors, type LoadClient } from "../bench/resets-load.ts";
import { newAccount, stack } from "./support/api.ts";

let apiKey: string;

beforeAll(async () => {
  apiKey = (await newAccount()).key.secret;
});

describe("a mixed load at 32 keep-alive connections", () => {
  const connections = 32;
  // Every kind 100 times: a few seconds on two cores.
  const total = () => requestKinds(apiKey).length * 100;

  it.each<LoadClient>(["agent", "fetch"])("gets an answer to every request, none a reset (%s client)", async (client) => {
    const report = await runLoad({ baseUrl: stack().baseUrl, apiKey, client, total: total(), connections, maxMs: 40_000 });
    const summary = formatReport(report);
    expect(report.sent, summary).toBe(total());
    expect(socketErrors(report), summary).toBe(0);
    for (const kind of Object.values(report.kinds)) expect(kind.unexpected, summary).toBe(0);
    // No connection was ended under the client: the agent never had to open more than it keeps.
    if (report.socketsOpened !== null) expect(report.socketsOpened, summary).toBeLessThanOrEqual(connections);
  });
});

describe("one connection", () => {
  const head = (length: number, headers = "") =>
    `POST /v1/systemone HTTP/1.1\r\nhost: edge\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n${headers}\r\n`;
  const post = (body: string, headers = "") => head(Buffer.byteLength(body), headers) + body;
  const withKey = () => `authorization: Bearer ${apiKey}\r\n`;
  // Without a Content-Length the edge learns the size only by reading, and stops at the limit.
  const chunked = (body: string, headers = "") =>
    `POST /v1/systemone HTTP/1.1\r\nhost: edge\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n${headers}\r\n` +
    `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;

  it.each([
    ["refused before its body is read (no key)", () => post('{"model":"svc-shared"}'), 401],
    ["refused by its Content-Length (too large)", () => post(" ".repeat(LIMITS.decisionBodyBytes + 1), withKey()), 422],
    ["refused while its body is read (too large, chunked)", () => chunked(" ".repeat(LIMITS.decisionBodyBytes + 1), withKey()), 422],
  ])("answers the next request after a request %s", async (_, request, status) => {
    const replies = await exchange(request() + "GET / HTTP/1.1\r\nhost: edge\r\n\r\n", 2);
    expect(replies.statuses).toEqual([status, 200]);
    expect(replies.closedByServer).toBe(false);
  });

  it("answers a request that waits for 100-continue without waiting for its body", async () => {
    // Headers only: such a client sends its body once it is told to continue, and no sooner.
    const started = performance.now();
    const replies = await exchange(head(2_000_000, "expect: 100-continue\r\n"), 1);
    expect(replies.statuses).toEqual([401]);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

/**
 * Writes `bytes` on one new connection and reads until `count` responses came, the server closed, or
 * 10 s passed; also says whether the server closed the connection within 300 ms of the last one.
 */
function exchange(bytes: string, count: number): Promise<{ statuses: number[]; closedByServer: boolean }> {
  const url = new URL(stack().baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let received = "";
    let closedByServer = false;
    // A response follows the previous one's body directly, so a status line need not start a line.
    const statuses = () => [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ statuses: statuses(), closedByServer });
    };
    const timer = setTimeout(finish, 10_000);
    socket.on("error", reject);
    socket.on("end", () => {
      closedByServer = true;
      finish();
    });
    socket.on("data", (chunk) => {
      const before = statuses().length;
      received += chunk.toString("latin1");
      if (before < count && statuses().length >= count) setTimeout(finish, 300);
    });
    socket.write(bytes);
  });
}
