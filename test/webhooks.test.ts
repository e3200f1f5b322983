/**
 * Webhooks on the shared stack: endpoints managed with a session credential, validated as the
 * contract says; events written with the job's change in its transaction (and never without it),
 * delivered by the real sidecar to a real receiver on loopback, signed in the Standard Webhooks
 * format and checked with the verifier the TypeScript SDK ships; a receiver that answers 500 and
 * then 200; a rotated secret. A sidecar killed mid-delivery, and the production address policy, are
 * in bulk-crash.test.ts, on a stack of its own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Batch } from "../contract/batches.ts";
import { verifyWebhook, WebhookVerificationError } from "../contract/webhook-signature.ts";
import {
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from "../contract/webhooks.ts";
import { call, newAccount, query, remember, withDb } from "./support/api.ts";
import { lines, poll, submitted } from "./support/bulk.ts";
import { expectError, userRouteSecurity } from "./support/security.ts";
import { startReceiver, type Received, type Receiver } from "./support/webhook-receiver.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

let receiver: Receiver;
let account: Account;

beforeAll(async () => {
  receiver = await startReceiver();
  account = await newAccount();
});

afterAll(async () => {
  await receiver?.close();
});

async function register(owner: Account, body: Record<string, unknown>): Promise<WebhookEndpointWithSecret> {
  const reply = await call("/v1/webhooks", { token: owner.userToken, body });
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  const created = WebhookEndpointWithSecret.parse(reply.body);
  remember(created.secret);
  return created;
}

/** A batch created and cancelled before upload: its `batch.cancelled` event, at once. */
async function cancelledBatch(owner: Account, metadata?: Record<string, string>): Promise<string> {
  const created = await call<Batch>("/v1/batches", { token: owner.key.secret, body: { idempotency_key: `wh-${crypto.randomUUID()}`, input_bytes: 10, ...(metadata ? { metadata } : {}) } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  expect((await call<Batch>(`/v1/batches/${created.body.id}/cancel`, { token: owner.key.secret, body: {} })).body.status).toBe("cancelled");
  return created.body.id;
}

const about = (jobId: string) => (r: Received) => WebhookEvent.parse(JSON.parse(r.body)).data.id === jobId;

async function deliveries(owner: Account, endpointId: string) {
  const reply = await call(`/v1/webhooks/${endpointId}/deliveries`, { token: owner.userToken });
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  return WebhookDeliveryList.parse(reply.body).data;
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("POST /v1/webhooks", () => {
  userRouteSecurity({ method: "POST", path: "/v1/webhooks", body: { url: "http://127.0.0.1:9/hooks", events: ["batch.completed"] }, ok: 201 });

  it("registers an endpoint and shows its secret once: never in a listing or a read", async () => {
    const owner = await newAccount();
    const created = await register(owner, { url: "http://127.0.0.1:9/hooks", events: ["batch.completed", "training.ready"], description: "orders" });
    expect(created).toMatchObject({ object: "webhook_endpoint", url: "http://127.0.0.1:9/hooks", events: ["batch.completed", "training.ready"], description: "orders", secret_rotated_at: null });
    const listed = await call("/v1/webhooks", { token: owner.userToken });
    expect(WebhookEndpointList.parse(listed.body).data.map((e) => e.id)).toEqual([created.id]);
    const read = await call(`/v1/webhooks/${created.id}`, { token: owner.userToken });
    const { secret, ...withoutSecret } = created;
    expect(WebhookEndpoint.strict().parse(read.body)).toEqual(withoutSecret);
    expect(JSON.stringify([listed.body, read.body])).not.toContain(secret);
  });

  it("refuses an unknown field, an unknown or repeated event, a missing url and one that is not a URL, each naming it (422)", async () => {
    const owner = await newAccount();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ url: "http://127.0.0.1:9/", events: ["batch.completed"], secret: "mine" }, /secret/],
      [{ url: "http://127.0.0.1:9/", events: ["batch.done"] }, /event must be one of/],
      [{ url: "http://127.0.0.1:9/", events: ["batch.failed", "batch.failed"] }, /must not repeat/],
      [{ url: "http://127.0.0.1:9/", events: [] }, /at least one event/],
      [{ events: ["batch.failed"] }, /url is required/],
      [{ url: "not a url", events: ["batch.failed"] }, /not a valid absolute URL/],
      [{ url: "ftp://127.0.0.1/", events: ["batch.failed"] }, /https/],
      [{ url: "http://hooks.example.com/", events: ["batch.failed"] }, /https/],
      [{ url: "https://user:pw@hooks.example.com/", events: ["batch.failed"] }, /credentials/],
      [{ url: `https://hooks.example.com/${"a".repeat(WEBHOOK_LIMITS.urlChars)}`, events: ["batch.failed"] }, /at most 2048/],
    ];
    for (const [body, message] of cases) {
      const reply = await call("/v1/webhooks", { token: owner.userToken, body });
      expectError(reply, 422, "invalid_request");
      expect(JSON.stringify(reply.body)).toMatch(message);
    }
    expect(WebhookEndpointList.parse((await call("/v1/webhooks", { token: owner.userToken })).body).data).toEqual([]);
  });

  it(`takes at most ${WEBHOOK_LIMITS.endpoints} endpoints an account, even when created at once (409 webhook_endpoint_limit)`, async () => {
    const owner = await newAccount();
    const replies = await Promise.all(
      Array.from({ length: WEBHOOK_LIMITS.endpoints + 4 }, (_, i) => call("/v1/webhooks", { token: owner.userToken, body: { url: `http://127.0.0.1:9/${i}`, events: ["batch.failed"] } })),
    );
    expect(replies.filter((r) => r.status === 201)).toHaveLength(WEBHOOK_LIMITS.endpoints);
    for (const reply of replies.filter((r) => r.status !== 201)) expectError(reply, 409, "webhook_endpoint_limit");
    for (const reply of replies) if (reply.status === 201) remember(WebhookEndpointWithSecret.parse(reply.body).secret);
    // Deleting one frees its place.
    const first = WebhookEndpointWithSecret.parse(replies.find((r) => r.status === 201)!.body);
    expect((await call(`/v1/webhooks/${first.id}`, { method: "DELETE", token: owner.userToken })).body).toEqual({ id: first.id, object: "webhook_endpoint", deleted: true });
    await register(owner, { url: "http://127.0.0.1:9/again", events: ["batch.failed"] });
  });
});

describe("an endpoint of another account", () => {
  userRouteSecurity({ method: "GET", path: "/v1/webhooks" });

  it("is 404 on every route, as one that does not exist, and is left as it was", async () => {
    const owner = await newAccount();
    const other = await newAccount();
    const created = await register(owner, { url: "http://127.0.0.1:9/hooks", events: ["batch.failed"] });
    for (const id of [created.id, crypto.randomUUID(), "not-a-uuid"]) {
      expectError(await call(`/v1/webhooks/${id}`, { token: other.userToken }), 404, "not_found");
      expectError(await call(`/v1/webhooks/${id}`, { method: "DELETE", token: other.userToken }), 404, "not_found");
      expectError(await call(`/v1/webhooks/${id}/rotate_secret`, { token: other.userToken, body: {} }), 404, "not_found");
      expectError(await call(`/v1/webhooks/${id}/deliveries`, { token: other.userToken }), 404, "not_found");
    }
    expect(WebhookEndpointList.parse((await call("/v1/webhooks", { token: other.userToken })).body).data).toEqual([]);
    expect((await call(`/v1/webhooks/${created.id}`, { token: owner.userToken })).status).toBe(200);
  });
});

describe("deliveries", () => {
  it("sends a batch's completion to the endpoints subscribed to it, signed in the Standard Webhooks format, and logs it", { timeout: 120_000 }, async () => {
    const subscribed = await register(account, { url: receiver.url, events: ["batch.completed", "batch.failed"] });
    const elsewhere = await register(account, { url: `${receiver.url}/other`, events: ["training.ready"] });
    const id = await submitted(account, lines([1, 2].map((i) => ({ custom_id: `r${i}`, body: { state: `order ${i} arrived broken`, questions: { q: { type: "noul", instructions: "Is it a complaint?" } } } }))));
    expect((await poll(account, id)).status).toBe("completed");

    const [delivered] = await receiver.waitFor(1, about(id));
    const event = WebhookEvent.parse(await verifyWebhook(delivered!.body, delivered!.headers as Record<string, string>, subscribed.secret));
    expect(event).toMatchObject({ type: "batch.completed", data: { object: "batch", id, status: "completed", metadata: null } });
    expect(Math.abs(Date.parse(event.timestamp) - Date.now())).toBeLessThan(60_000);
    expect(delivered!.headers["content-type"]).toBe("application/json");
    expect(delivered!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    // Signed with this endpoint's secret only.
    await expect(verifyWebhook(delivered!.body, delivered!.headers as Record<string, string>, elsewhere.secret)).rejects.toThrow(WebhookVerificationError);

    const log = await until(() => deliveries(account, subscribed.id), (d) => d[0]?.status === "delivered");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ event_id: delivered!.headers["webhook-id"], event_type: "batch.completed", job_id: id, status: "delivered", attempts: 1, last_status_code: 200, last_error: null, next_attempt_at: null });
    expect(await deliveries(account, elsewhere.id)).toEqual([]);
    expect(receiver.received.filter(about(id))).toHaveLength(1);
  });

  it("tries again after a 500 with the same webhook-id and a fresh signature, and logs both attempts", { timeout: 90_000 }, async () => {
    const owner = await newAccount();
    const endpoint = await register(owner, { url: receiver.url, events: ["batch.cancelled"] });
    receiver.plan(500);
    const id = await cancelledBatch(owner, { order: "A-17" });

    const [first] = await receiver.waitFor(1, about(id));
    const pending = await until(() => deliveries(owner, endpoint.id), (d) => d[0]?.last_status_code === 500);
    expect(pending[0]).toMatchObject({ status: "pending", attempts: 1, last_status_code: 500, last_error: "http_status" });
    const waited = Date.parse(pending[0]!.next_attempt_at!) - Date.parse(pending[0]!.last_attempt_at!);
    expect(waited).toBeGreaterThanOrEqual(WEBHOOK_LIMITS.retryDelaysMs[0] - 1000);

    const [, second] = await receiver.waitFor(2, about(id), 60_000);
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(WEBHOOK_LIMITS.retryDelaysMs[0] - 1000);
    for (const attempt of [first!, second!]) {
      const event = WebhookEvent.parse(await verifyWebhook(attempt.body, attempt.headers as Record<string, string>, endpoint.secret));
      expect(event.data).toEqual({ object: "batch", id, status: "cancelled", metadata: { order: "A-17" } });
    }
    const log = await until(() => deliveries(owner, endpoint.id), (d) => d[0]?.status === "delivered");
    expect(log[0]).toMatchObject({ status: "delivered", attempts: 2, last_status_code: 200, last_error: null });
  });

  it("writes an event with the change it is about: none for a change rolled back, one per subscribed endpoint for a change committed", async () => {
    const owner = await newAccount();
    const endpoints = await Promise.all([register(owner, { url: `${receiver.url}/a`, events: ["batch.cancelled"] }), register(owner, { url: `${receiver.url}/b`, events: WEBHOOK_EVENTS })]);
    await register(owner, { url: `${receiver.url}/c`, events: ["batch.completed"] });
    const created = await call<Batch>("/v1/batches", { token: owner.key.secret, body: { idempotency_key: "rolled-back", input_bytes: 10 } });
    const id = created.body.id;
    await withDb(async (db) => {
      await db.query("BEGIN");
      await db.query("UPDATE batches SET status = 'cancelled', finished_at = now() WHERE id = $1", [id]);
      expect((await db.query("SELECT 1 FROM webhook_deliveries WHERE job_id = $1", [id])).rows).toHaveLength(2);
      await db.query("ROLLBACK");
    });
    expect(await query("SELECT 1 FROM webhook_deliveries WHERE job_id = $1", [id])).toEqual([]);

    await call(`/v1/batches/${id}/cancel`, { token: owner.key.secret, body: {} });
    const rows = await query<{ endpoint_id: string; event_id: string }>("SELECT endpoint_id, event_id FROM webhook_deliveries WHERE job_id = $1", [id]);
    expect(rows.map((r) => r.endpoint_id).sort()).toEqual(endpoints.map((e) => e.id).sort());
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(1);
    // A second cancel changes nothing, and writes nothing.
    await call(`/v1/batches/${id}/cancel`, { token: owner.key.secret, body: {} });
    expect(await query("SELECT 1 FROM webhook_deliveries WHERE job_id = $1", [id])).toHaveLength(2);
  });

  it("signs with the new and the previous secret for a day after a rotation; the SDK's verifier takes either and refuses others", { timeout: 60_000 }, async () => {
    const owner = await newAccount();
    const endpoint = await register(owner, { url: receiver.url, events: ["batch.cancelled"] });
    const reply = await call(`/v1/webhooks/${endpoint.id}/rotate_secret`, { token: owner.userToken, body: {} });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const rotated = WebhookEndpointWithSecret.parse(reply.body);
    remember(rotated.secret);
    expect(rotated.secret).not.toBe(endpoint.secret);
    expect(rotated.secret_rotated_at).not.toBeNull();

    const id = await cancelledBatch(owner);
    const [delivered] = await receiver.waitFor(1, about(id));
    const headers = delivered!.headers as Record<string, string>;
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    for (const secret of [rotated.secret, endpoint.secret]) expect(await verifyWebhook(delivered!.body, headers, secret)).toMatchObject({ type: "batch.cancelled" });
    const stranger = (await register(owner, { url: `${receiver.url}/x`, events: ["batch.failed"] })).secret;
    await expect(verifyWebhook(delivered!.body, headers, stranger)).rejects.toThrow(/no signature matches/);
    await expect(verifyWebhook(delivered!.body.replace("cancelled", "completed"), headers, rotated.secret)).rejects.toThrow(/no signature matches/);
    await expect(verifyWebhook(delivered!.body, headers, rotated.secret, { now: new Date(Date.now() + 10 * 60_000) })).rejects.toThrow(/too far from now/);
  });

  it("drops the pending deliveries of an endpoint deleted", async () => {
    const owner = await newAccount();
    const endpoint = await register(owner, { url: "http://127.0.0.1:9/nobody-listens", events: ["batch.cancelled"] });
    await cancelledBatch(owner);
    expect(await query("SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1", [endpoint.id])).toHaveLength(1);
    await call(`/v1/webhooks/${endpoint.id}`, { method: "DELETE", token: owner.userToken });
    expect(await query("SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1", [endpoint.id])).toEqual([]);
    expectError(await call(`/v1/webhooks/${endpoint.id}/deliveries`, { token: owner.userToken }), 404, "not_found");
  });
});
