/**
 * Webhook signing secrets at rest, on the shared stack: the edge stores an endpoint's secret sealed
 * under WEBHOOK_SECRET_KEY, so the column is not the secret, holds nothing of it and does not sign;
 * the stack's sidecar opens it to sign, at creation and after a rotation; a sealed secret copied onto
 * another endpoint's row signs nothing there. A row still in the plain form of before delivers, and
 * a sidecar starting over the database (as a deploy of this version starts one) seals it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhook, WebhookVerificationError } from "../contract/webhook-signature.ts";
import { WebhookEndpointWithSecret, type WebhookEndpoint } from "../contract/webhooks.ts";
import type { Child } from "../local/process.ts";
import { sidecarAddress, startSidecar } from "../local/tiers.ts";
import { call, newAccount, query, remember, stack } from "./support/api.ts";
import { startReceiver, type Received, type Receiver } from "./support/webhook-receiver.ts";
import { about, cancelledBatch, registerEndpoint } from "./support/webhooks.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
});

afterAll(async () => {
  await receiver?.close();
});

interface Stored {
  secret: string;
  previous_secret: string | null;
}

async function stored(endpoint: WebhookEndpoint): Promise<Stored> {
  const [row] = await query<Stored>("SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1", [endpoint.id]);
  return row!;
}

/** Neither column is a secret or holds one, in the form shown or as the base64 of its bytes. */
function expectHoldsNone(row: Stored, secrets: string[]): void {
  for (const value of [row.secret, row.previous_secret].filter((v) => v !== null)) {
    expect(value).toMatch(/^aesgcm1:[0-9a-f]{12}:[A-Za-z0-9_-]+$/);
    for (const secret of secrets) expect(value).not.toContain(secret.slice("whsec_".length));
  }
}

/** An event of `owner`, whose one endpoint subscribed to it points at the receiver, as the receiver got it. */
async function delivered(owner: Account): Promise<Received> {
  const id = await cancelledBatch(owner);
  const [got] = await receiver.waitFor(1, about(id), 30_000);
  return got!;
}

const headersOf = (r: Received) => r.headers as Record<string, string>;

describe("a webhook secret at rest", () => {
  it("is stored sealed, holds nothing of the secret and cannot sign; the sidecar signs with the secret shown, at creation and after a rotation", { timeout: 90_000 }, async () => {
    const owner = await newAccount();
    const endpoint = await registerEndpoint(owner, { url: `${receiver.url}/sealed`, events: ["batch.cancelled"] });
    const atCreation = await stored(endpoint);
    expectHoldsNone(atCreation, [endpoint.secret]);
    expect(atCreation.previous_secret).toBeNull();

    const first = await delivered(owner);
    await verifyWebhook(first.body, headersOf(first), endpoint.secret);
    // What a dump of the database holds verifies nothing.
    await expect(verifyWebhook(first.body, headersOf(first), atCreation.secret)).rejects.toThrow(WebhookVerificationError);

    const reply = await call(`/v1/webhooks/${endpoint.id}/rotate_secret`, { token: owner.userToken, body: {} });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const rotated = WebhookEndpointWithSecret.parse(reply.body);
    remember(rotated.secret);
    const afterRotation = await stored(endpoint);
    expectHoldsNone(afterRotation, [endpoint.secret, rotated.secret]);
    expect(afterRotation.previous_secret).toBe(atCreation.secret);

    const second = await delivered(owner);
    for (const secret of [rotated.secret, endpoint.secret]) await verifyWebhook(second.body, headersOf(second), secret);
    for (const dumped of [afterRotation.secret, afterRotation.previous_secret!]) {
      await expect(verifyWebhook(second.body, headersOf(second), dumped)).rejects.toThrow(WebhookVerificationError);
    }
  });

  it("signs nothing once copied onto another endpoint's row: that endpoint's delivery waits, unattempted", { timeout: 60_000 }, async () => {
    const [owner, thief] = await Promise.all([newAccount(), newAccount()]);
    const victim = await registerEndpoint(owner, { url: `${receiver.url}/victim`, events: ["batch.completed"] });
    const copied = await registerEndpoint(thief, { url: `${receiver.url}/thief`, events: ["batch.cancelled"] });
    await query("UPDATE webhook_endpoints SET secret = (SELECT secret FROM webhook_endpoints WHERE id = $1) WHERE id = $2", [victim.id, copied.id]);

    const id = await cancelledBatch(thief);
    const waiting = async () => (await query<{ attempts: number; status: string; waits_s: number }>(
      "SELECT attempts, status, extract(epoch FROM next_attempt_at - now())::float AS waits_s FROM webhook_deliveries WHERE job_id = $1",
      [id],
    ))[0];
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !((await waiting())!.waits_s > 10)) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await waiting()).toMatchObject({ attempts: 0, status: "pending" });
    expect((await waiting())!.waits_s).toBeGreaterThan(10);
    expect(receiver.received.filter(about(id))).toEqual([]);
    const log = readFileSync(join(stack().logDir, "sidecar.log"), "utf8");
    expect(log).toMatch(new RegExp(`endpoint ${copied.id}'s secret does not open under key [0-9a-f]{12}: altered, or sealed for another endpoint; not attempted, it waits`));
    await call(`/v1/webhooks/${copied.id}`, { method: "DELETE", token: thief.userToken });
  });
});

describe("a webhook secret stored in the plain form of before", () => {
  let sidecar: Child | undefined;

  afterAll(async () => {
    await sidecar?.stop();
  });

  it("still delivers, and a sidecar starting over the database seals it; it then signs as before", { timeout: 120_000 }, async () => {
    const owner = await newAccount();
    const endpoint = await registerEndpoint(owner, { url: `${receiver.url}/plain`, events: ["batch.cancelled"] });
    await query("UPDATE webhook_endpoints SET secret = $2 WHERE id = $1", [endpoint.id, endpoint.secret]);
    const plain = await delivered(owner);
    await verifyWebhook(plain.body, headersOf(plain), endpoint.secret);
    expect((await stored(endpoint)).secret).toBe(endpoint.secret);

    const address = await sidecarAddress();
    sidecar = await startSidecar({
      name: "sidecar-sealing",
      address,
      secret: stack().secrets.sidecar,
      database: { DATABASE_URL: stack().databaseUrl, NEON_LOCAL_BRIDGE: stack().neonBridge },
      runtimeSecrets: {},
      edgeUrl: stack().baseUrl,
      upstash: { url: stack().upstashUrl, token: stack().secrets.upstash },
      webhookKey: stack().secrets.webhookKey,
      logDir: stack().logDir,
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (await stored(endpoint)).secret === endpoint.secret) await new Promise((resolve) => setTimeout(resolve, 200));
    expectHoldsNone(await stored(endpoint), [endpoint.secret]);
    expect(readFileSync(sidecar.logPath, "utf8")).toMatch(/sidecar: webhook secrets: [1-9]\d* endpoints sealed under key [0-9a-f]{12}; 0 sealed under a key WEBHOOK_SECRET_KEY does not hold/);

    const sealed = await delivered(owner);
    await verifyWebhook(sealed.body, headersOf(sealed), endpoint.secret);
  });
});
