/**
 * The sender's address check before each attempt, where production's policy holds (private targets
 * off). A name that resolves to a private address cannot be made on demand without changing this
 * machine's resolver, so those cases give the sender a resolver that answers what the case needs
 * (`fakeDnsAnswering`); the receiver is real, and must see nothing. A resolver that never answers
 * cannot be made on demand either (`fakeDnsHanging`): the attempt's deadline must still end it.
 * Leasing, fairness and sealed secrets run on the real stack (test/webhook-*.test.ts).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newWebhookSecret } from "../contract/webhook-signature.ts";
import { startReceiver, type Receiver } from "../test/support/webhook-receiver.ts";
import { BUN } from "../local/tiers.ts";
import { parseSecretList } from "../server-shared/secret-list.ts";
import { webhookKeyring } from "../server-shared/webhook-secrets.ts";
import { WEBHOOK_LIMITS } from "../contract/webhooks.ts";
import { attemptBudgetMs, pinned, WEBHOOK_LEASE_MS, WebhookSender, type Lookup, type WebhookSenderDeps } from "./webhooks.ts";

const fakeDnsAnswering = (...addresses: string[]): Lookup => async () => addresses;
const fakeDnsHanging: Lookup = () => new Promise<string[]>(() => {});

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

// attempt() is given secrets already opened: the keys are never used here.
const keyring = () => webhookKeyring(parseSecretList(Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")));
const sender = (deps: Omit<WebhookSenderDeps, "pool" | "keyring">) => new WebhookSender({ pool, keyring, ...deps });

const due = (url: string) => ({ id: crypto.randomUUID(), event_id: crypto.randomUUID(), body: "{}", attempts: 1, url, secret: newWebhookSecret(), previous_secret: null });

describe("the webhook sender's address check (production: private targets off)", () => {
  it("refuses a name that resolves to a private, loopback or link-local address, sending nothing", async () => {
    for (const addresses of [["10.0.0.7"], ["127.0.0.1"], ["169.254.169.254"], ["93.184.215.14", "192.168.1.9"], ["::1"], []]) {
      const production = sender({ privateTargets: false, lookup: fakeDnsAnswering(...addresses) });
      expect(await production.attempt(due("https://hooks.example.com/in")), addresses.join(",")).toEqual({ delivered: false, status: null, error: "address_not_allowed" });
    }
    expect(receiver.received).toEqual([]);
  });

  it("refuses a loopback receiver outright, which a local stack may use", async () => {
    const production = sender({ privateTargets: false, lookup: fakeDnsAnswering("93.184.215.14") });
    expect(await production.attempt(due(receiver.url))).toEqual({ delivered: false, status: null, error: "address_not_allowed" });
    expect(receiver.received).toEqual([]);
    const local = sender({ privateTargets: true });
    expect(await local.attempt(due(receiver.url))).toEqual({ delivered: true, status: 200 });
    expect(receiver.received).toHaveLength(1);
  });

  it("records a redirect as a failure and does not follow it", async () => {
    receiver.plan(307);
    const local = sender({ privateTargets: true });
    expect(await local.attempt(due(receiver.url))).toEqual({ delivered: false, status: 307, error: "redirect" });
  });
});

describe("an attempt's deadline", () => {
  it("covers resolving the name: a resolver that never answers ends in a timeout at the deadline, sending nothing", async () => {
    const leaseMs = 600;
    const received = receiver.received.length;
    const started = Date.now();
    const outcome = await sender({ privateTargets: false, lookup: fakeDnsHanging, leaseMs }).attempt(due("https://hooks.example.com/in"));
    expect(outcome).toEqual({ delivered: false, status: null, error: "timeout" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(attemptBudgetMs(leaseMs) - 20);
    expect(Date.now() - started).toBeLessThan(leaseMs);
    expect(receiver.received).toHaveLength(received);
  });

  it("ends a receiver that never answers within half the lease, so that the outcome is recorded before the lease ends", async () => {
    receiver.plan("hang");
    const leaseMs = 1000;
    const started = Date.now();
    expect(await sender({ privateTargets: true, leaseMs }).attempt(due(receiver.url))).toEqual({ delivered: false, status: null, error: "timeout" });
    expect(Date.now() - started).toBeLessThan(leaseMs);
  });

  it("is the attempt timeout under the production lease, which is longer than the whole attempt", () => {
    expect(attemptBudgetMs(WEBHOOK_LEASE_MS)).toBe(WEBHOOK_LIMITS.attemptTimeoutMs);
    expect(WEBHOOK_LEASE_MS).toBeGreaterThan(2 * WEBHOOK_LIMITS.attemptTimeoutMs);
    expect(attemptBudgetMs(2000)).toBe(1000);
  });
});

describe("a production attempt goes to the address it checked (DNS rebinding reaches nothing else)", () => {
  it("keeps the name for Host and TLS, and connects to the checked address", () => {
    const request = pinned(new URL("https://hooks.example.com:8443/in?x=1"), "93.184.215.14");
    expect(request.target.href).toBe("https://93.184.215.14:8443/in?x=1");
    expect(request.host).toEqual({ host: "hooks.example.com:8443" });
    expect(request.tls).toEqual({ tls: { serverName: "hooks.example.com" } });
    expect(pinned(new URL("https://hooks.example.com/in"), "2606:2800:21f:cb07:6820:80da:af6b:8b2c").target.host).toBe("[2606:2800:21f:cb07:6820:80da:af6b:8b2c]");
    // A literal address is already what was checked.
    expect(pinned(new URL("https://93.184.215.14/in"), "93.184.215.14")).toEqual({ target: new URL("https://93.184.215.14/in"), host: {}, tls: {} });
  });

  it("under Bun, as the sidecar runs: the pinned request reaches the checked address and TLS verifies the certificate against the name", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-pin-"));
    try {
      const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
      execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=hooks.test", "-addext", "subjectAltName=DNS:hooks.test"], { stdio: "ignore" });
      const printed = execFileSync(BUN, [join(import.meta.dirname, "../test/support/pinned-webhook-fetch.ts"), cert, key], { encoding: "utf8", timeout: 30_000 });
      const { port, outcomes } = JSON.parse(printed) as { port: number; outcomes: Record<string, string> };
      expect(outcomes["hooks.test"]).toBe(`200 hooks.test:${port}`);
      // The certificate names hooks.test only: a request pinned for another name is refused by TLS.
      expect(outcomes["elsewhere.test"]).toMatch(/^error .*(ALTNAME|CERT)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
