/**
 * Webhook helpers for tests on the shared stack: an endpoint registered through the real edge (its
 * secret remembered for the log scan), a job event made at once (a batch created and cancelled before
 * upload), and a receiver's filter for one job's events.
 */
import { expect } from "vitest";
import { Batch } from "../../contract/batches.ts";
import { WebhookEndpointWithSecret, WebhookEvent } from "../../contract/webhooks.ts";
import { call, remember, type newAccount } from "./api.ts";
import type { Received } from "./webhook-receiver.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

export async function registerEndpoint(owner: Account, body: Record<string, unknown>): Promise<WebhookEndpointWithSecret> {
  const reply = await call("/v1/webhooks", { token: owner.userToken, body });
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  const created = WebhookEndpointWithSecret.parse(reply.body);
  remember(created.secret);
  return created;
}

/** A batch created and cancelled before upload: its `batch.cancelled` event, written at once. Returns the batch's id. */
export async function cancelledBatch(owner: Account): Promise<string> {
  const created = await call<Batch>("/v1/batches", { token: owner.key.secret, body: { idempotency_key: `wh-${crypto.randomUUID()}`, input_bytes: 10 } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  expect((await call<Batch>(`/v1/batches/${created.body.id}/cancel`, { token: owner.key.secret, body: {} })).body.status).toBe("cancelled");
  return created.body.id;
}

/** The receiver's requests about one job. */
export const about = (jobId: string) => (r: Received) => WebhookEvent.parse(JSON.parse(r.body)).data.id === jobId;
