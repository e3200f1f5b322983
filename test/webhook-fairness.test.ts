/**
 * Webhook delivery is fair, on the shared stack with its real sidecar: one account whose 16 endpoints
 * never answer, with an event waiting for each of them 20 times over, holds no more than its places
 * (WEBHOOK_LIMITS.inFlight), and another account's delivery still arrives within 2 s of its event,
 * every time.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WEBHOOK_LIMITS } from "../contract/webhooks.ts";
import { call, newAccount, query } from "./support/api.ts";
import { startReceiver, type Receiver } from "./support/webhook-receiver.ts";
import { about, cancelledBatch, registerEndpoint } from "./support/webhooks.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

let hanging: Receiver;
let prompt: Receiver;
let slow: Account;
let other: Account;
const slowEndpoints: string[] = [];

beforeAll(async () => {
  [hanging, prompt, slow, other] = await Promise.all([startReceiver(), startReceiver(), newAccount(), newAccount()]);
  // Never answers: every attempt at the slow account's endpoints runs to its timeout.
  hanging.plan(...Array<"hang">(10_000).fill("hang"));
  for (let i = 0; i < WEBHOOK_LIMITS.endpoints; i++) slowEndpoints.push((await registerEndpoint(slow, { url: `${hanging.url}/${i}`, events: ["batch.cancelled"] })).id);
  await registerEndpoint(other, { url: prompt.url, events: ["batch.cancelled"] });
});

afterAll(async () => {
  // Its deliveries go with its endpoints, so that they hold no place in the files after this one.
  for (const id of slowEndpoints) await call(`/v1/webhooks/${id}`, { method: "DELETE", token: slow.userToken });
  await Promise.all([hanging?.close(), prompt?.close()]);
});

/** The slow account's attempts in flight now, in all and at its busiest endpoint (leases not yet ended, whichever sidecar holds them). */
async function slowInFlight(): Promise<{ total: number; busiestEndpoint: number }> {
  const rows = await query<{ endpoint_id: string; n: number }>(
    `SELECT d.endpoint_id, count(*)::int AS n FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
      WHERE e.account_id = $1 AND d.status = 'pending' AND d.lease_expires_at > now() GROUP BY d.endpoint_id`,
    [slow.accountId],
  );
  return { total: rows.reduce((sum, row) => sum + row.n, 0), busiestEndpoint: Math.max(0, ...rows.map((row) => row.n)) };
}

describe("webhook delivery while one account's endpoints hang", () => {
  it("delivers another account's event within 2 s of it, every time, and the hanging account holds only its places", { timeout: 180_000 }, async () => {
    for (let i = 0; i < 20; i++) await cancelledBatch(slow);
    expect(await query("SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.account_id = $1", [slow.accountId])).toHaveLength(20 * WEBHOOK_LIMITS.endpoints);
    // The slow account's attempts have begun: its endpoints hold requests open.
    await hanging.waitFor(WEBHOOK_LIMITS.inFlight.perAccount, () => true, 10_000);

    for (let event = 0; event < 5; event++) {
      const started = Date.now();
      const id = await cancelledBatch(other);
      const [arrived] = await prompt.waitFor(1, about(id), 15_000);
      expect(arrived!.at - started, `event ${event + 1}`).toBeLessThan(2000);
      const inFlight = await slowInFlight();
      expect(inFlight.total).toBeLessThanOrEqual(WEBHOOK_LIMITS.inFlight.perAccount);
      expect(inFlight.busiestEndpoint).toBeLessThanOrEqual(WEBHOOK_LIMITS.inFlight.perEndpoint);
    }
  });
});
