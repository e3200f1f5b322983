/**
 * A runtime swapped between admission and the passes, a fault the real runtime cannot show on
 * demand. `SwappingRuntime` forwards every call to the real runtime and stamps its responses as the
 * release the registry names, except that from a chosen moment its score responses name another
 * fingerprint. Through the real edge and sidecar: admission's tokenize call is verified, and so is
 * every pass; a pass stamped by another fingerprint is a 503 with no answer and no usage row.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "./support/fake-server.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { RUNTIME_PATHS } from "../server-shared/runtime-protocol.ts";
import { RUNTIME_TOKEN_ENV } from "../local/stack.ts";
import { registerRelease, retireRelease } from "../ops/releases.ts";
import { call, newAccount, stack, usageRows, withDb } from "./support/api.ts";

const RELEASE = `swapping-${randomBytes(4).toString("hex")}`;
const FINGERPRINT = "f".repeat(64);

/** Fake: the real runtime behind a proxy that restamps its answers; `swapped` makes score and group answers another fingerprint's. */
class SwappingRuntime {
  swapped = false;
  calls: string[] = [];
  url = "";
  private server: Awaited<ReturnType<typeof listen>> | undefined;

  async start(real: string): Promise<void> {
    this.server = await listen(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      this.calls.push(req.url ?? "");
      const answer = await fetch(`${real}${req.url}`, {
        method: req.method,
        headers: { authorization: req.headers.authorization ?? "", "content-type": "application/json" },
        body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
      });
      const body = (await answer.json()) as Record<string, unknown>;
      const other = this.swapped && (req.url === RUNTIME_PATHS.score || req.url === RUNTIME_PATHS.scoreGroup);
      res.statusCode = answer.status;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(answer.ok ? { ...body, release_id: RELEASE, fingerprint: other ? "0".repeat(64) : FINGERPRINT } : body));
    });
    this.url = this.server.url;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}

const runtime = new SwappingRuntime();
let account: Awaited<ReturnType<typeof newAccount>>;

beforeAll(async () => {
  account = await newAccount();
  await runtime.start(stack().runtimeUrl);
  // Served by the shared stack's sidecar, whose runtime secret the proxy passes on.
  await withDb((db) =>
    registerRelease(db, {
      id: RELEASE,
      fingerprint: FINGERPRINT,
      url: runtime.url,
      token_env: RUNTIME_TOKEN_ENV,
      release_date: "2026-11-22",
      description: "SwappingRuntime",
      owners: [account.accountId],
      sidecar_url: stack().sidecarUrl,
    }),
  );
});

afterAll(async () => {
  await withDb((db) => retireRelease(db, RELEASE)).catch(() => undefined);
  await runtime.stop();
});

const ticket = { model: RELEASE, state: "The invoice was charged twice.", questions: { money: { type: "noul", instructions: "Is this about money?" } } };

describe("a runtime swapped after admission", () => {
  it("answers while every response names the registered release (the proxy itself is sound)", async () => {
    const reply = await call("/v1/systemone", { token: account.key.secret, body: ticket });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(await usageRows(reply.requestId!)).toHaveLength(1);
    // One tokenize call (admission) and the passes; no separate identity call.
    expect(runtime.calls.filter((path) => path === RUNTIME_PATHS.identity)).toEqual([]);
    expect(runtime.calls.filter((path) => path === RUNTIME_PATHS.tokenize)).toHaveLength(1);
  });

  it("refuses with 503 identity_mismatch, no answer and no usage, when a pass names another fingerprint", async () => {
    runtime.swapped = true;
    try {
      const reply = await call("/v1/systemone", { token: account.key.secret, body: ticket });
      expect(reply.status).toBe(503);
      expect(ErrorEnvelope.parse(reply.body).error.code).toBe("identity_mismatch");
      expect(reply.body).not.toHaveProperty("answers");
      // usageRows waits up to 3 s for a row: none comes.
      expect(await usageRows(reply.requestId!)).toHaveLength(0);
    } finally {
      runtime.swapped = false;
    }
  });
});
