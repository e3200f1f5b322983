/**
 * The sender's address check before each attempt, where production's policy holds (private targets
 * off). A name that resolves to a private address cannot be made on demand without changing this
 * machine's resolver, so those cases give the sender a resolver that answers what the case needs
 * (`fakeDnsAnswering`); the receiver is real, and must see nothing.
 */
import { Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newWebhookSecret } from "../contract/webhook-signature.ts";
import { startReceiver, type Receiver } from "../test/support/webhook-receiver.ts";
import { WebhookSender, type Lookup } from "./webhooks.ts";

const fakeDnsAnswering = (...addresses: string[]): Lookup => async () => addresses;

let receiver: Receiver;
// Never connected: attempt() reads no table.
const pool = new Pool({ connectionString: "postgres://nobody@127.0.0.1:1/none" });

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
  await pool.end();
});

const due = (url: string) => ({ id: crypto.randomUUID(), event_id: crypto.randomUUID(), body: "{}", attempts: 1, url, secret: newWebhookSecret(), previous_secret: null });

describe("the webhook sender's address check (production: private targets off)", () => {
  it("refuses a name that resolves to a private, loopback or link-local address, sending nothing", async () => {
    for (const addresses of [["10.0.0.7"], ["127.0.0.1"], ["169.254.169.254"], ["93.184.215.14", "192.168.1.9"], ["::1"], []]) {
      const sender = new WebhookSender({ pool, privateTargets: false, lookup: fakeDnsAnswering(...addresses) });
      expect(await sender.attempt(due("https://hooks.example.com/in")), addresses.join(",")).toEqual({ delivered: false, status: null, error: "address_not_allowed" });
    }
    expect(receiver.received).toEqual([]);
  });

  it("refuses a loopback receiver outright, which a local stack may use", async () => {
    const production = new WebhookSender({ pool, privateTargets: false, lookup: fakeDnsAnswering("93.184.215.14") });
    expect(await production.attempt(due(receiver.url))).toEqual({ delivered: false, status: null, error: "address_not_allowed" });
    expect(receiver.received).toEqual([]);
    const local = new WebhookSender({ pool, privateTargets: true });
    expect(await local.attempt(due(receiver.url))).toEqual({ delivered: true, status: 200 });
    expect(receiver.received).toHaveLength(1);
  });

  it("records a redirect as a failure and does not follow it", async () => {
    receiver.plan(307);
    const local = new WebhookSender({ pool, privateTargets: true });
    expect(await local.attempt(due(receiver.url))).toEqual({ delivered: false, status: 307, error: "redirect" });
  });
});
