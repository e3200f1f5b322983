/**
 * The sidecar owns runtimes, and the registry says which sidecar serves each release: a second
 * sidecar with its own runtime, serving a second release, works beside the shared stack's. The edge
 * sends each sidecar only a release id and fingerprint; each sidecar finds its runtime in the
 * registry and refuses a release the registry assigns to another sidecar.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionResponse } from "../contract/decision.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { HealthReport } from "../contract/health.ts";
import { SHARED_ALIAS } from "../contract/limits.ts";
import { SIDECAR_PATHS, type ResolvedRelease } from "../server-shared/sidecar-protocol.ts";
import { ensureModel } from "../local/model.ts";
import type { Child } from "../local/process.ts";
import { sidecarAddress, startRuntime, startSidecar, type StartedRuntime } from "../local/tiers.ts";
import { registerRelease, retireRelease } from "../ops/releases.ts";
import { call, newAccount, query, remember, stack, usageRows, withDb } from "./support/api.ts";
import { lines, poll, results, submitted } from "./support/bulk.ts";
import { operatorHealthAfterChange } from "./support/health.ts";

const SECOND = `second-${randomBytes(4).toString("hex")}`;
const runtimeSecret = remember(randomBytes(32).toString("base64url"));
let runtime: StartedRuntime;
let sidecar: Child;
let secondSidecarUrl: string;
let account: Awaited<ReturnType<typeof newAccount>>;
/** When the second sidecar was registered and started: the health report read below was probed after it. */
let startedAt = 0;

beforeAll(async () => {
  account = await newAccount();
  const model = await ensureModel();
  // The same weights under another release id: another identity, served by its own runtime.
  runtime = await startRuntime({ name: "runtime-second", modelPath: model.path, secret: runtimeSecret, logDir: stack().logDir, env: { RUNTIME_RELEASE_ID: SECOND } });
  const address = await sidecarAddress();
  secondSidecarUrl = address.url;
  await withDb((db) =>
    registerRelease(db, {
      id: SECOND,
      fingerprint: runtime.ready.fingerprint,
      url: runtime.url,
      token_env: "SECOND_RUNTIME_SECRET",
      release_date: "2026-11-20",
      description: "served by the second sidecar",
      owners: [account.accountId],
      sidecar_url: secondSidecarUrl,
    }),
  );
  sidecar = await startSidecar({
    name: "sidecar-second",
    address,
    // The edge holds one sidecar secret, shared with every sidecar.
    secret: stack().secrets.sidecar,
    database: { DATABASE_URL: stack().databaseUrl, NEON_LOCAL_BRIDGE: stack().neonBridge },
    runtimeSecrets: { SECOND_RUNTIME_SECRET: runtimeSecret },
    // Its bulk worker shares the queue with the stack's.
    edgeUrl: stack().baseUrl,
    upstash: { url: stack().upstashUrl, token: stack().secrets.upstash },
    webhookKey: stack().secrets.webhookKey,
    logDir: stack().logDir,
  });
  startedAt = Date.now();
});

afterAll(async () => {
  await sidecar?.stop();
  await runtime?.child.stop();
  await withDb((db) => retireRelease(db, SECOND)).catch(() => undefined);
});

const ticket = { state: "The invoice was charged twice.", questions: { money: { type: "noul", instructions: "Is this about money?" } } };
const decide = (model: string) => call<Record<string, unknown>>("/v1/systemone", { token: account.key.secret, body: { model, ...ticket } });

/** A release as the edge resolves it: id, fingerprint and row revision. */
async function resolved(id: string): Promise<ResolvedRelease> {
  return (await query<ResolvedRelease>("SELECT id, fingerprint, revision::int AS revision FROM model_releases WHERE id = $1", [id]))[0]!;
}

/** A decide call straight to a sidecar, as the edge makes it. */
function direct(sidecarUrl: string, secret: string, release: ResolvedRelease, requestId = "req_direct"): Promise<Response> {
  const body = { release, request: ticket, account_id: account.accountId, key_id: account.key.id, request_id: requestId };
  return fetch(`${sidecarUrl}${SIDECAR_PATHS.decide}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("two sidecars serving different releases", () => {
  it("routes each release's decisions to its own sidecar and runtime", async () => {
    const first = await decide(SHARED_ALIAS);
    const second = await decide(SECOND);
    expect([first.status, second.status], JSON.stringify([first.body, second.body])).toEqual([200, 200]);
    expect(DecisionResponse.parse(first.body).model).toBe(stack().releaseId);
    expect(DecisionResponse.parse(second.body).model).toBe(SECOND);
    const used = await usageRows<{ release_id: string }>(second.requestId!, 1, "release_id");
    expect(used).toEqual([{ release_id: SECOND }]);
  });

  it("a sidecar refuses a release the registry assigns to another sidecar, before any pass", async () => {
    const misrouted = [
      await direct(secondSidecarUrl, stack().secrets.sidecar, await resolved(stack().releaseId)),
      await direct(stack().sidecarUrl, stack().secrets.sidecar, await resolved(SECOND)),
    ];
    for (const res of misrouted) {
      expect(res.status).toBe(503);
      expect(ErrorEnvelope.parse(await res.json()).error.code).toBe("unavailable");
    }
    expect(await usageRows("req_direct")).toHaveLength(0);
  });

  it("reports both sidecars' links in the health report", async () => {
    const names = HealthReport.parse((await operatorHealthAfterChange(startedAt)).body).links.map((link) => link.name);
    expect(names).toEqual(expect.arrayContaining(["edge->sidecar #1", "edge->sidecar #2", `sidecar->runtime ${SECOND} #2`]));
  });

  it("share one bulk queue: each runs the records of its own release, and every record has one result and one usage row", async () => {
    const records = Array.from({ length: 12 }, (_, i) => ({
      custom_id: `r${i}`,
      body: { ...ticket, ...(i % 2 === 0 ? { model: SECOND } : {}) },
    }));
    const id = await submitted(account, lines(records));
    const done = await poll(account, id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 12, completed: 12, failed: 0 } });
    const answered = await results(account, id);
    expect(answered.map((r) => r.custom_id)).toEqual(records.map((r) => r.custom_id));
    for (const [i, r] of answered.entries()) expect(r).toMatchObject({ response: { model: i % 2 === 0 ? SECOND : stack().releaseId } });
    const usage = await query<{ request_id: string; release_id: string }>("SELECT request_id, release_id FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`]);
    expect(usage).toHaveLength(12);
    for (const u of usage) {
      const line = Number(u.request_id.split("_").at(-1));
      expect(u.release_id).toBe((line - 1) % 2 === 0 ? SECOND : stack().releaseId);
    }
  });

  it("reads a changed registry row again on the very next request (its entries are kept by row revision)", async () => {
    expect((await decide(SECOND)).status).toBe(200);
    const before = await resolved(SECOND);
    // The runtime moves away (nothing listens on port 1): the very next request goes there and fails.
    await query("UPDATE model_releases SET url = 'http://127.0.0.1:1' WHERE id = $1", [SECOND]);
    const moved = await resolved(SECOND);
    expect(moved.revision).toBe(before.revision + 1);
    const refused = await decide(SECOND);
    expect(refused.status).toBe(503);
    expect(ErrorEnvelope.parse(refused.body).error.code).toBe("unavailable");
    // Back again: the next request finds the runtime.
    await query("UPDATE model_releases SET url = $2 WHERE id = $1", [SECOND, runtime.url]);
    expect((await decide(SECOND)).status).toBe(200);
  });

  it("answers without waiting for the usage row, and writes every answered request's row before a clean shutdown ends", async () => {
    const release = await resolved(SECOND);
    const ids = [1, 2].map((n) => `req_shutdown_${n}_${randomBytes(4).toString("hex")}`);
    await withDb(async (db) => {
      // Until this transaction ends, every usage insert waits: the answers must not.
      await db.query("BEGIN");
      await db.query("LOCK TABLE usage_records IN EXCLUSIVE MODE");
      try {
        for (const id of ids) expect((await direct(secondSidecarUrl, stack().secrets.sidecar, release, id)).status).toBe(200);
        const stopping = sidecar.stop(); // SIGTERM: a clean shutdown
        await new Promise((resolve) => setTimeout(resolve, 500));
        // Still flushing its usage: it has not exited while the rows cannot be written.
        expect(sidecar.proc.exitCode).toBeNull();
        await db.query("COMMIT");
        await stopping;
      } finally {
        await db.query("ROLLBACK").catch(() => undefined);
      }
    });
    expect(sidecar.proc.exitCode).toBe(0);
    for (const id of ids) expect(await usageRows(id)).toHaveLength(1);
  });

  it("keeps serving the first release when the second sidecar stops, and says the second is unavailable", async () => {
    await sidecar.stop();
    const second = await decide(SECOND);
    expect(second.status).toBe(503);
    expect((await decide(SHARED_ALIAS)).status).toBe(200);
  });
});
