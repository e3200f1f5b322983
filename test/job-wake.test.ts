/**
 * Idle job workers are woken when work arrives (sidecar/jobs/worker.ts, server-shared/wake.ts): a
 * second sidecar with a runtime of its own, serving a release of its own, whose worker looks for
 * work only once an hour (SVC_TEST_JOB_IDLE_MS), still runs a batch's records at once. The edge wakes
 * every sidecar of the registry when a job is submitted; the sidecar that validates a batch wakes the
 * other sidecars that serve its records. A receiver on loopback, registered as the sidecar of a
 * release of its own, records the wakes the edge sends.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIDECAR_PATHS } from "../server-shared/sidecar-protocol.ts";
import { ensureModel } from "../local/model.ts";
import type { Child } from "../local/process.ts";
import { sidecarAddress, startRuntime, startSidecar, type StartedRuntime } from "../local/tiers.ts";
import { registerRelease, retireRelease } from "../ops/releases.ts";
import { newAccount, query, remember, stack, withDb } from "./support/api.ts";
import { heldSubmitted, lines, poll, results, submitted } from "./support/bulk.ts";

const SERVED = `wake-${randomBytes(4).toString("hex")}`;
const RECORDER = `wake-recorder-${randomBytes(4).toString("hex")}`;
const runtimeSecret = remember(randomBytes(32).toString("base64url"));
let runtime: StartedRuntime;
let sidecar: Child;
let account: Awaited<ReturnType<typeof newAccount>>;
let recorder: Server;
/** The wakes the receiver got: method, path and authorization. */
const wakes: { method: string; path: string; authorization: string | undefined }[] = [];

beforeAll(async () => {
  account = await newAccount();
  recorder = createServer((req, res) => {
    wakes.push({ method: req.method ?? "", path: req.url ?? "", authorization: req.headers.authorization });
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => recorder.listen(0, "127.0.0.1", resolve));
  const model = await ensureModel();
  runtime = await startRuntime({ name: "runtime-wake", modelPath: model.path, secret: runtimeSecret, logDir: stack().logDir, env: { RUNTIME_RELEASE_ID: SERVED } });
  const address = await sidecarAddress();
  const release = { fingerprint: runtime.ready.fingerprint, url: runtime.url, token_env: "WAKE_RUNTIME_SECRET", release_date: "2026-11-28", owners: [account.accountId] };
  await withDb(async (db) => {
    await registerRelease(db, { ...release, id: SERVED, description: "served by a sidecar that polls once an hour", sidecar_url: address.url });
    await registerRelease(db, { ...release, id: RECORDER, description: "its sidecar is a receiver that records wakes", sidecar_url: `http://127.0.0.1:${(recorder.address() as AddressInfo).port}` });
  });
  sidecar = await startSidecar({
    name: "sidecar-wake",
    address,
    secret: stack().secrets.sidecar,
    database: { DATABASE_URL: stack().databaseUrl, NEON_LOCAL_BRIDGE: stack().neonBridge },
    runtimeSecrets: { WAKE_RUNTIME_SECRET: runtimeSecret },
    edgeUrl: stack().baseUrl,
    upstash: { url: stack().upstashUrl, token: stack().secrets.upstash },
    webhookKey: stack().secrets.webhookKey,
    // Its worker looks for work at start, then only once an hour unless woken.
    extraEnv: { SVC_TEST_JOB_IDLE_MS: "3600000" },
    logDir: stack().logDir,
  });
});

afterAll(async () => {
  await sidecar?.stop();
  await runtime?.child.stop();
  await new Promise((resolve) => recorder?.close(resolve));
  await withDb(async (db) => {
    await retireRelease(db, SERVED);
    await retireRelease(db, RECORDER);
  }).catch(() => undefined);
});

const ticket = (i: number) => ({ custom_id: `r${i}`, body: { model: SERVED, state: `Ticket ${i}: the invoice was charged twice.`, questions: { money: { type: "noul", instructions: "Is this about money?" } } } });

async function until(done: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("waking idle job workers", () => {
  it("the edge wakes every sidecar of the registry when a job is submitted, with the sidecar secret", async () => {
    const before = wakes.length;
    const id = await submitted(account, lines([ticket(0)]));
    await until(() => wakes.length > before);
    expect(wakes.slice(before)).toEqual([{ method: "POST", path: SIDECAR_PATHS.wakeJobs, authorization: `Bearer ${stack().secrets.sidecar}` }]);
    // The sidecar that polls once an hour ran the record: the edge's wake or the validating sidecar's reached it.
    expect(await poll(account, id, undefined, 30_000)).toMatchObject({ status: "completed", request_counts: { total: 1, completed: 1 } });
  });

  it("the sidecar that validates a batch wakes the one that serves its records", async () => {
    // Held while the edge's wakes arrive: both sidecars find nothing to claim and go idle, the
    // second for an hour. The shared stack's sidecar validates the batch at its next poll.
    const before = wakes.length;
    const batch = await heldSubmitted(account, lines([0, 1, 2].map(ticket)));
    await until(() => wakes.length > before);
    // The edge's wake reached both sidecars at once; a second for the hourly one to find nothing.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await batch.release();
    const done = await poll(account, batch.id, undefined, 30_000);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 3, completed: 3, failed: 0 } });
    for (const result of await results(account, batch.id)) expect(result).toMatchObject({ response: { model: SERVED } });
  });

  it("answers 401 to a wake without the sidecar secret, and 204 to one with it", async () => {
    const url = `${(await query<{ sidecar_url: string }>("SELECT sidecar_url FROM model_releases WHERE id = $1", [SERVED]))[0]!.sidecar_url}${SIDECAR_PATHS.wakeJobs}`;
    expect((await fetch(url, { method: "POST" })).status).toBe(401);
    expect((await fetch(url, { method: "POST", headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await fetch(url, { method: "POST", headers: { authorization: `Bearer ${stack().secrets.sidecar}` } })).status).toBe(204);
  });
});
