/**
 * Crashes during a batch or a training, with real processes on a stack of its own (leases and the cleanup interval
 * shortened through the sidecar's SVC_TEST_* settings): the sidecar killed with SIGKILL at
 * random moments and started again, over and over; the runtime killed mid-batch; Postgres restarted
 * mid-batch. At the end every
 * custom_id has exactly one committed result and the usage rows match the successful results one to
 * one: nothing lost, nothing duplicated. A training through sidecar kills registers its model once.
 * Webhooks through the same kills: every job's end is delivered to a receiver on loopback, and a
 * delivery whose attempt a kill interrupted is sent again. Then retention cleanup, on the same stack.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Batch, ResultsPage, type ResultRecord } from "../contract/batches.ts";
import { CreatedKey } from "../contract/keys.ts";
import { startStack, type Stack } from "../local/stack.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { Training } from "../contract/trainings.ts";
import { seededRandom } from "./support/random.ts";
import { verifyWebhook } from "../contract/webhook-signature.ts";
import { WEBHOOK_EVENTS, WebhookEndpointWithSecret, WebhookEvent } from "../contract/webhooks.ts";
import { startReceiver, type Received, type Receiver } from "./support/webhook-receiver.ts";
import { animalSentences, noulFile as trainingFile } from "./support/training.ts";

/** Leases of 2 s renewed every 0.5 s: a killed worker's batch is claimed again 2 s after the crash. */
/** A webhook attempt holds its delivery 2 s: one a killed sidecar was sending is taken again 2 s later. */
/**
 * Every bulk claim takes 5 records, run as one execution and committed together, as on a GPU host
 * with millisecond passes (the CPU runtime's passes alone would make it one): the guarantees below
 * hold for a claim's records as a whole.
 */
const CLAIM_RECORDS = 5;
const SIDECAR_ENV = {
  SVC_TEST_JOB_LEASE_MS: "2000",
  SVC_TEST_JOB_RENEW_MS: "500",
  SVC_TEST_CLEANUP_EVERY_MS: "500",
  SVC_TEST_WEBHOOK_LEASE_MS: "2000",
  SVC_TEST_BULK_CLAIM_RECORDS: String(CLAIM_RECORDS),
};
const RECORDS = 200;
const KILLS = 6;

const dataDir = mkdtempSync(join(tmpdir(), "svc-crash-"));
chmodSync(dataDir, 0o711);
let stack: Stack;
let key: string;
let userToken: string;
let receiver: Receiver;
let endpoint: WebhookEndpointWithSecret;

beforeAll(async () => {
  stack = await startStack({ dataDir, log: () => {}, sidecarEnv: SIDECAR_ENV });
  const token = await getUserAccessToken({ issuer: stack.idp.issuer, login: "crash-tester" });
  userToken = token;
  const res = await fetch(`${stack.baseUrl}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "crash" }),
  });
  key = CreatedKey.parse(await res.json()).secret;
  receiver = await startReceiver();
  const hook = await fetch(`${stack.baseUrl}/v1/webhooks`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ url: receiver.url, events: WEBHOOK_EVENTS }),
  });
  endpoint = WebhookEndpointWithSecret.parse(await hook.json());
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function api<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as T;
}

async function submit(file: string): Promise<string> {
  const batch = Batch.parse(await api("/v1/batches", { idempotency_key: `crash-${Date.now()}`, input_bytes: Buffer.byteLength(file) }));
  expect((await fetch(batch.upload!.url, { method: "PUT", headers: batch.upload!.headers, body: file })).status).toBe(200);
  expect(Batch.parse(await api(`/v1/batches/${batch.id}/submit`, {})).status).toBe("queued");
  return batch.id;
}

const status = async (id: string) => Batch.parse(await api(`/v1/batches/${id}`));

async function allResults(id: string): Promise<ResultRecord[]> {
  const all: ResultRecord[] = [];
  let after: number | null = 0;
  while (after !== null) {
    const page: ResultsPage = ResultsPage.parse(await api(`/v1/batches/${id}/results?after=${after}`));
    all.push(...page.data);
    after = page.next_cursor;
  }
  return all;
}

async function rows<T extends pg.QueryResultRow>(text: string, params: unknown[]): Promise<T[]> {
  const db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  try {
    return (await db.query<T>(text, params)).rows;
  } finally {
    await db.end();
  }
}

describe("a batch through sidecar crashes", () => {
  it(`keeps exactly one result per record and one usage row per answer after ${KILLS} SIGKILLs of the sidecar`, { timeout: 600_000 }, async () => {
    const ids = Array.from({ length: RECORDS }, (_, i) => `rec-${i}`);
    const file = ids.map((customId, i) => JSON.stringify({ custom_id: customId, body: { state: `ticket ${i}`, questions: { q: { type: "noul" } } } })).join("\n") + "\n";
    const id = await submit(file);

    const random = seededRandom(20261122);
    const committed = async () => {
      const { request_counts: counts, finished_at } = await status(id);
      return { n: counts.completed + counts.failed, finished: finished_at !== null };
    };
    let kills = 0;
    let committedAtKills: number[] = [];
    let last = 0;
    while (kills < KILLS) {
      // Each kill falls while records are being processed: once the restarted sidecar has committed
      // again (however slow this machine is now), after a random part of a claim's time more.
      await until(async () => (await committed()).n > last, 120_000);
      await new Promise((resolve) => setTimeout(resolve, random() * 1500));
      const before = await committed();
      if (before.finished) break;
      await stack.restartSidecar("SIGKILL");
      kills++;
      committedAtKills.push(before.n);
      last = before.n;
    }
    expect(kills).toBe(KILLS);
    expect(committedAtKills.every((n) => n > 0 && n < RECORDS)).toBe(true);
    committedAtKills = [];

    const deadline = Date.now() + 540_000;
    let done = await status(id);
    while (done.finished_at === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      done = await status(id);
    }
    expect(done).toMatchObject({ status: "completed", request_counts: { total: RECORDS, completed: RECORDS, failed: 0 } });

    const results = await allResults(id);
    expect(results.map((r) => r.custom_id)).toEqual(ids);
    const stored = await rows<{ n: string; lines: string }>("SELECT count(*) AS n, count(DISTINCT line) AS lines FROM batch_results WHERE batch_id = $1", [id]);
    expect(stored[0]).toEqual({ n: String(RECORDS), lines: String(RECORDS) });
    // The records were committed a claim at a time (a commit's rows share its transaction's time):
    // mostly 5 together, fewer where a kill or the batch's end cut a claim short.
    const commits = await rows<{ commits: string }>("SELECT count(DISTINCT committed_at) AS commits FROM batch_results WHERE batch_id = $1", [id]);
    expect(Number(commits[0]!.commits)).toBeLessThanOrEqual(RECORDS / CLAIM_RECORDS + 2 * KILLS);
    const usage = await rows<{ request_id: string }>("SELECT request_id FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`]);
    expect(usage).toHaveLength(RECORDS);
    expect(new Set(usage.map((u) => u.request_id))).toEqual(new Set(ids.map((_, i) => `batch_${id}_${i + 1}`)));
    // Its end is told once as an event (a repeat, if a kill fell mid-attempt, carries the same id).
    expect(await eventsAbout(id)).toEqual([{ type: "batch.completed", status: "completed" }]);
  });

  it("finishes a batch whose runtime is killed mid-batch: each record answered after recovery or an error record after three attempts", { timeout: 300_000 }, async () => {
    const n = 20;
    const id = await submit(noulFile(n));
    await until(async () => (await status(id)).request_counts.completed >= 3);
    await stack.crashRuntime();
    // Down long enough for the record in flight to use up its attempts (1 s, then 2 s apart).
    await new Promise((resolve) => setTimeout(resolve, 5000));
    await stack.restoreRuntime();
    await until(async () => (await status(id)).finished_at !== null, 240_000);
    const done = await status(id);
    expect(done.status).toBe("completed");
    expect(done.request_counts.total).toBe(n);
    const results = await allResults(id);
    expect(results.map((r) => r.custom_id)).toEqual(Array.from({ length: n }, (_, i) => `rec-${i}`));
    const failed = results.filter((r) => "error" in r);
    expect(failed.length).toBe(done.request_counts.failed);
    for (const r of failed) expect(r).toMatchObject({ error: { status: 503, code: "unavailable" } });
    expect(done.request_counts.completed).toBeGreaterThan(3);
    const usage = await rows<{ request_id: string }>("SELECT request_id FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`]);
    expect(usage).toHaveLength(done.request_counts.completed);
  });
});

describe("a batch through a Postgres restart", () => {
  it("keeps exactly one result per record and one usage row per answer when Postgres restarts mid-batch", { timeout: 300_000 }, async () => {
    const n = 30;
    const id = await submit(noulFile(n));
    await until(async () => (await status(id)).request_counts.completed >= 3);
    const started = async () => (await rows<{ at: string }>("SELECT pg_postmaster_start_time()::text AS at", []))[0]!.at;
    const before = await started();
    await stack.restartPostgres();
    expect(await started()).not.toBe(before);
    expect((await status(id)).finished_at).toBeNull();
    await until(async () => (await status(id).catch(() => ({ finished_at: null }))).finished_at !== null, 240_000);
    const done = await status(id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: n, completed: n, failed: 0 } });
    expect((await allResults(id)).map((r) => r.custom_id)).toEqual(Array.from({ length: n }, (_, i) => `rec-${i}`));
    const usage = await rows<{ request_id: string }>("SELECT request_id FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`]);
    expect(new Set(usage.map((u) => u.request_id)).size).toBe(n);
    expect(usage).toHaveLength(n);
  });
});

/** A training of the crash tester's account, created, uploaded and submitted. */
async function submitTraining(file: string): Promise<string> {
  const call = async (path: string, body?: unknown) =>
    Training.parse(
      await (
        await fetch(`${stack.baseUrl}${path}`, {
          method: body === undefined ? "GET" : "POST",
          headers: { authorization: `Bearer ${userToken}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        })
      ).json(),
    );
  const training = await call("/v1/trainings", { idempotency_key: `crash-${Date.now()}`, input_bytes: Buffer.byteLength(file) });
  expect((await fetch(training.upload!.url, { method: "PUT", headers: training.upload!.headers, body: file })).status).toBe(200);
  expect((await call(`/v1/trainings/${training.id}/submit`, {})).status).toBe("queued");
  return training.id;
}

const trainingState = async (id: string) =>
  (await rows<{ status: string; examples_read: number; total_examples: number }>("SELECT status, examples_read, total_examples FROM trainings WHERE id = $1", [id]))[0]!;

describe("a training through sidecar kills", () => {
  it("reads every example once, registers its model once, and ends ready", { timeout: 300_000 }, async () => {
    const id = await submitTraining(await trainingFile({ type: "noul", instructions: "Does this sentence belong to group A?" }, animalSentences()));
    const readAtKills: number[] = [];
    for (const after of [4, 16, 32]) {
      await until(async () => (await trainingState(id)).examples_read >= after, 120_000);
      readAtKills.push((await trainingState(id)).examples_read);
      await stack.restartSidecar("SIGKILL");
    }
    expect(readAtKills.every((n) => n > 0 && n < 48)).toBe(true);
    await until(async () => ["ready", "rejected", "failed"].includes((await trainingState(id)).status), 180_000);
    expect(await trainingState(id)).toEqual({ status: "ready", examples_read: 48, total_examples: 48 });
    const examples = await rows<{ n: string }>("SELECT count(*) AS n FROM training_examples WHERE training_id = $1 AND features IS NOT NULL", [id]);
    expect(Number(examples[0]!.n)).toBe(48);
    const releases = await rows<{ id: string; sidecar_url: string | null }>("SELECT id, sidecar_url FROM model_releases WHERE training_id = $1", [id]);
    expect(releases).toHaveLength(1);
    expect(releases[0]!.sidecar_url).not.toBeNull();
    expect(await eventsAbout(id)).toEqual([{ type: "training.ready", status: "ready" }]);
  });
});

describe("webhooks through a sidecar kill", () => {
  it("sends again, with the same webhook-id, an event whose attempt a SIGKILL of the sidecar interrupted", { timeout: 120_000 }, async () => {
    receiver.plan("hang");
    const batch = Batch.parse(await api("/v1/batches", { idempotency_key: `hook-${Date.now()}`, input_bytes: 10 }));
    expect(Batch.parse(await api(`/v1/batches/${batch.id}/cancel`, {})).status).toBe("cancelled");
    // The sidecar is sending it, and the receiver holds the request open: the kill falls between the
    // commit and any delivery.
    const [first] = await receiver.waitFor(1, about(batch.id));
    const [delivery] = await rows<{ status: string; attempts: number }>("SELECT status, attempts FROM webhook_deliveries WHERE job_id = $1", [batch.id]);
    expect(delivery).toEqual({ status: "pending", attempts: 1 });
    await stack.restartSidecar("SIGKILL");

    const [, second] = await receiver.waitFor(2, about(batch.id), 60_000);
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    await verifyWebhook(second!.body, second!.headers as Record<string, string>, endpoint.secret);
    await until(async () => (await rows<{ status: string }>("SELECT status FROM webhook_deliveries WHERE job_id = $1", [batch.id]))[0]?.status === "delivered", 30_000);
    expect(await rows("SELECT status, attempts FROM webhook_deliveries WHERE job_id = $1", [batch.id])).toEqual([{ status: "delivered", attempts: 2 }]);
  });

  it("refuses plaintext, private and loopback endpoints on an edge configured as production is (WEBHOOK_PRIVATE_TARGETS off)", { timeout: 60_000 }, async () => {
    const production = await stack.addEdge("miniflare", { WEBHOOK_PRIVATE_TARGETS: "off" });
    const register = (url: string) =>
      fetch(`${production.baseUrl}/v1/webhooks`, {
        method: "POST",
        headers: { authorization: `Bearer ${userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ url, events: ["batch.completed"] }),
      });
    for (const url of [receiver.url, "http://hooks.example.com/in", "https://127.0.0.1/in", "https://localhost/in", "https://10.0.0.8/in", "https://[::1]/in", "https://169.254.169.254/latest"]) {
      const res = await register(url);
      expect(res.status, url).toBe(422);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
    }
    const accepted = await register("https://hooks.example.com/in");
    expect(accepted.status).toBe(201);
    const { id } = WebhookEndpointWithSecret.parse(await accepted.json());
    await fetch(`${production.baseUrl}/v1/webhooks/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${userToken}` } });
  });
});

describe("retention cleanup", () => {
  it("deletes a training's file and examples 30 days after it ended; its report and model stay", { timeout: 180_000 }, async () => {
    const id = await submitTraining(await trainingFile({ type: "noul", instructions: "Is it in group B?" }, animalSentences()));
    await until(async () => ["ready", "rejected", "failed"].includes((await trainingState(id)).status), 150_000);
    const [training] = await rows<{ object_key: string; model_id: string }>("SELECT object_key, model_id FROM trainings WHERE id = $1", [id]);
    await rows("UPDATE trainings SET finished_at = now() - interval '29 days 23 hours' WHERE id = $1", [id]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await rows("SELECT 1 FROM trainings WHERE id = $1 AND purged_at IS NULL", [id])).toHaveLength(1);
    await rows("UPDATE trainings SET finished_at = now() - interval '30 days 1 minute' WHERE id = $1", [id]);
    await until(async () => (await rows("SELECT 1 FROM trainings WHERE id = $1 AND purged_at IS NOT NULL", [id])).length === 1, 30_000);
    expect(await rows("SELECT 1 FROM training_examples WHERE training_id = $1", [id])).toEqual([]);
    expect(await stored(training!.object_key)).toBe(false);
    // The job, its report and its model are kept: the model answers until its owner retires it.
    const status = await fetch(`${stack.baseUrl}/v1/trainings/${id}/report`, { headers: { authorization: `Bearer ${userToken}` } });
    expect(status.status).toBe(200);
    const decision = await fetch(`${stack.baseUrl}/v1/systemone`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: training!.model_id, state: "A goat.", questions: { q: { type: "noul", instructions: "Is it in group B?" } } }),
    });
    expect(decision.status).toBe(200);
  });


  it("deletes a cancelled batch's input at the next cleanup run, and keeps what it committed for the data period", { timeout: 120_000 }, async () => {
    const id = await submit(noulFile(RECORDS));
    await until(async () => (await status(id)).request_counts.completed >= 2, 60_000);
    const cancelled = Batch.parse(await api(`/v1/batches/${id}/cancel`, {}));
    expect(cancelled.status).toBe("cancelled");
    const [batch] = await rows<{ object_key: string }>("SELECT object_key FROM batches WHERE id = $1", [id]);
    await until(async () => (await rows("SELECT 1 FROM batches WHERE id = $1 AND input_deleted_at IS NOT NULL", [id])).length === 1, 30_000);
    expect(await stored(batch!.object_key)).toBe(false);
    // Not purged: its results are served, every one it committed.
    expect(await rows("SELECT 1 FROM batches WHERE id = $1 AND purged_at IS NULL", [id])).toHaveLength(1);
    const results = await allResults(id);
    expect(results.length).toBe((await status(id)).request_counts.completed + (await status(id)).request_counts.failed);
    expect(results.length).toBeGreaterThanOrEqual(2);
  });

  it("deletes a batch's input, records and results 7 days after it finished and frees its storage; its metadata after 30", { timeout: 120_000 }, async () => {
    const id = await submit(noulFile(2));
    await until(async () => (await status(id)).finished_at !== null, 60_000);
    const [batch] = await rows<{ object_key: string }>("SELECT object_key FROM batches WHERE id = $1", [id]);
    // A completed batch's input is kept with its results, past many cleanup runs (every 0.5 s here).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await stored(batch!.object_key)).toBe(true);
    // Seven days and a minute ago: the next cleanup run (every 0.5 s here) purges it.
    await rows("UPDATE batches SET finished_at = now() - interval '7 days 1 minute' WHERE id = $1", [id]);
    await until(async () => (await rows("SELECT 1 FROM batches WHERE id = $1 AND purged_at IS NOT NULL", [id])).length === 1, 30_000);
    expect(await rows("SELECT 1 FROM batch_results WHERE batch_id = $1 UNION ALL SELECT 1 FROM batch_records WHERE batch_id = $1", [id])).toEqual([]);
    expect((await fetch(`${stack.baseUrl}/v1/batches/${id}/results`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(410);
    // The object is gone from R2: a grant to read it finds nothing.
    expect(await stored(batch!.object_key)).toBe(false);
    // Thirty days and a minute ago: the metadata and old usage rows go too.
    await rows("UPDATE batches SET finished_at = now() - interval '30 days 1 minute' WHERE id = $1", [id]);
    await rows("UPDATE usage_records SET created_at = now() - interval '30 days 1 minute' WHERE request_id LIKE $1", [`batch_${id}_%`]);
    await until(async () => (await rows("SELECT 1 FROM batches WHERE id = $1", [id])).length === 0, 30_000);
    expect(await rows("SELECT 1 FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`])).toEqual([]);
    expect((await fetch(`${stack.baseUrl}/v1/batches/${id}`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(404);
  });
});

/** Whether storage holds `objectKey`: a read grant the edge signs for the sidecar finds it (200) or not (404). */
async function stored(objectKey: string): Promise<boolean> {
  const grant = await fetch(`${stack.baseUrl}/internal/grants`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.secrets.sidecar}`, "content-type": "application/json" },
    body: JSON.stringify({ object: objectKey, method: "GET" }),
  });
  const { url } = (await grant.json()) as { url: string };
  const res = await fetch(url);
  await res.body?.cancel();
  if (res.status !== 200 && res.status !== 404) throw new Error(`reading ${objectKey}: HTTP ${res.status}`);
  return res.status === 200;
}

const about = (jobId: string) => (r: Received) => WebhookEvent.parse(JSON.parse(r.body)).data.id === jobId;

/** The events the receiver got about a job, once each (a repeat carries the same webhook-id), each verified. */
async function eventsAbout(jobId: string): Promise<{ type: string; status: string }[]> {
  const got = await receiver.waitFor(1, about(jobId), 30_000);
  const byId = new Map(got.map((r) => [r.headers["webhook-id"], r]));
  return Promise.all(
    [...byId.values()].map(async (r) => {
      const event = WebhookEvent.parse(await verifyWebhook(r.body, r.headers as Record<string, string>, endpoint.secret));
      return { type: event.type, status: event.data.status };
    }),
  );
}

const noulFile = (n: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `rec-${i}`, body: { state: `ticket ${i}`, questions: { q: { type: "noul" } } } })).join("\n") + "\n";

async function until(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
