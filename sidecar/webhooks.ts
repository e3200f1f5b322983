/**
 * The webhook sender (runs in the sidecar beside the job workers): takes due deliveries from the
 * outbox (schema.sql webhook_deliveries, written in the transaction of the job's change), POSTs each
 * to its endpoint signed in the Standard Webhooks format, and records the outcome: delivered on a
 * 2xx, otherwise tried again after the next wait of WEBHOOK_LIMITS.retryDelaysMs, failed after the
 * last. Several sidecars may send at once: a delivery is leased to one attempt (SKIP LOCKED), and a
 * sender that dies mid-attempt leaves it to be taken again when its lease ends, so each event
 * arrives at least once; receivers drop repeats by `webhook-id`.
 *
 * Before each attempt the endpoint's address is checked again (contract/webhooks.ts): with
 * `privateTargets` off (production), every address its name resolves to must be public, and the
 * request goes to the address checked (`pinned`: TLS still verifies the certificate against the
 * name), so a name that answers a public address to the check and a private one a moment later
 * (DNS rebinding) reaches nothing private.
 *
 *     const sender = new WebhookSender({ pool, privateTargets: false });
 *     sender.start();
 *     await sender.stop();   // the attempts in flight finish first
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { Pool } from "@neondatabase/serverless";
import { z } from "zod";
import { signWebhook } from "../contract/webhook-signature.ts";
import { checkWebhookUrl, isIpLiteral, isPublicAddress, unbracket, WEBHOOK_LIMITS } from "../contract/webhooks.ts";
import { Column } from "../server-shared/db.ts";
import { Periodic } from "./periodic.ts";

/** How often the outbox is read when the last read found nothing due. */
const POLL_MS = 1000;
/** Deliveries attempted at once by one sender. */
const PER_ROUND = 8;
/** An attempt's lease: its timeout and a margin. */
export const WEBHOOK_LEASE_MS = WEBHOOK_LIMITS.attemptTimeoutMs + 20_000;

/** Resolves a host name to every address it has (node:dns's `lookup` with `all`). */
export type Lookup = (hostname: string) => Promise<string[]>;
const systemLookup: Lookup = async (hostname) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

export interface WebhookSenderDeps {
  pool: Pool;
  /** The local stack's WEBHOOK_PRIVATE_TARGETS: loopback and private receivers allowed. Off in production. */
  privateTargets: boolean;
  leaseMs?: number;
  lookup?: Lookup;
  log?: (line: string) => void;
  /** Told of each attempt's outcome (the sidecar's svc_webhook_attempts_total). */
  attempted?: (delivered: boolean) => void;
}

const Due = z.object({
  id: z.string(),
  event_id: z.string(),
  body: z.string(),
  attempts: Column.int,
  url: z.string(),
  secret: z.string(),
  previous_secret: z.string().nullable(),
});
type Due = z.infer<typeof Due>;

export type AttemptOutcome = { delivered: true; status: number } | { delivered: false; status: number | null; error: "http_status" | "redirect" | "timeout" | "connection_failed" | "address_not_allowed" };

/** A request bound to one address: its URL with the address for host, the name's Host header and TLS server name. */
export interface Pinned {
  target: URL;
  host: { host?: string };
  tls: { tls?: { serverName: string } };
}

/** `url` sent to `address` (one the check passed): the connection cannot go where a second lookup would point. */
export function pinned(url: URL, address: string): Pinned {
  if (isIpLiteral(url.hostname)) return { target: url, host: {}, tls: {} };
  const target = new URL(url);
  target.hostname = address.includes(":") ? `[${address}]` : address;
  return { target, host: { host: url.host }, tls: { tls: { serverName: url.hostname } } };
}

export class WebhookSender {
  private readonly log: (line: string) => void;
  private readonly lookup: Lookup;
  private readonly loop: Periodic;

  constructor(private readonly deps: WebhookSenderDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.lookup = deps.lookup ?? systemLookup;
    this.loop = new Periodic("sidecar: webhooks", POLL_MS, async () => (await this.round()) > 0, this.log);
  }

  start(): void {
    this.loop.start();
  }

  /** The attempts in flight finish first. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Leases up to PER_ROUND due deliveries, attempts them at once and records each outcome; returns how many. */
  async round(): Promise<number> {
    const { rows } = await this.deps.pool.query(
      `UPDATE webhook_deliveries d
          SET lease_expires_at = now() + make_interval(secs => $1::double precision / 1000), attempts = d.attempts + 1, last_attempt_at = now()
         FROM webhook_endpoints e
        WHERE e.id = d.endpoint_id AND d.id IN (
                SELECT w.id FROM webhook_deliveries w
                 WHERE w.status = 'pending' AND w.next_attempt_at <= now() AND (w.lease_expires_at IS NULL OR w.lease_expires_at <= now())
                 ORDER BY w.next_attempt_at
                 LIMIT $2
                 FOR UPDATE SKIP LOCKED)
        RETURNING d.id, d.event_id, d.payload::text AS body, d.attempts, e.url, e.secret,
                  CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END AS previous_secret`,
      [this.deps.leaseMs ?? WEBHOOK_LEASE_MS, PER_ROUND],
    );
    await Promise.all(rows.map(async (row) => {
      const due = Due.parse(row);
      const outcome = await this.attempt(due);
      this.deps.attempted?.(outcome.delivered);
      await this.record(due, outcome);
    }));
    return rows.length;
  }

  /** One POST of a delivery, signed for this attempt; never throws. */
  async attempt(due: Due): Promise<AttemptOutcome> {
    const checked = checkWebhookUrl(due.url, { privateTargets: this.deps.privateTargets });
    if ("error" in checked) return { delivered: false, status: null, error: "address_not_allowed" };
    let request: Pinned = { target: checked.url, host: {}, tls: {} };
    if (!this.deps.privateTargets) {
      let addresses: string[];
      try {
        addresses = await this.lookup(unbracket(checked.url.hostname));
      } catch {
        return { delivered: false, status: null, error: "connection_failed" };
      }
      if (addresses.length === 0 || !addresses.every(isPublicAddress)) return { delivered: false, status: null, error: "address_not_allowed" };
      request = pinned(checked.url, addresses[0]!);
    }
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets = due.previous_secret ? [due.secret, due.previous_secret] : [due.secret];
    try {
      const res = await fetch(request.target, {
        method: "POST",
        ...request.tls,
        headers: {
          ...request.host,
          "content-type": "application/json",
          "user-agent": "svc-webhooks/1",
          "webhook-id": due.event_id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": await signWebhook(secrets, due.event_id, timestamp, due.body),
        },
        body: due.body,
        redirect: "manual",
        signal: AbortSignal.timeout(WEBHOOK_LIMITS.attemptTimeoutMs),
      });
      await res.body?.cancel().catch(() => {});
      if (res.status >= 200 && res.status < 300) return { delivered: true, status: res.status };
      return { delivered: false, status: res.status, error: res.status >= 300 && res.status < 400 ? "redirect" : "http_status" };
    } catch (err) {
      const name = (err as Error).name;
      return { delivered: false, status: null, error: name === "TimeoutError" || name === "AbortError" ? "timeout" : "connection_failed" };
    }
  }

  /** Writes an attempt's outcome, unless the delivery has moved on (its endpoint deleted, or its lease ended and another attempt began). */
  private async record(due: Due, outcome: AttemptOutcome): Promise<void> {
    const delays = WEBHOOK_LIMITS.retryDelaysMs;
    const last = !outcome.delivered && due.attempts > delays.length;
    const status = outcome.delivered ? "delivered" : last ? "failed" : "pending";
    await this.deps.pool.query(
      `UPDATE webhook_deliveries
          SET status = $2, finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END,
              next_attempt_at = CASE WHEN $2 = 'pending' THEN now() + make_interval(secs => $5::double precision / 1000) ELSE next_attempt_at END,
              lease_expires_at = NULL, last_status_code = $3, last_error = $4
        WHERE id = $1 AND status = 'pending' AND attempts = $6`,
      [due.id, status, outcome.status, outcome.delivered ? null : outcome.error, delays[Math.min(due.attempts, delays.length) - 1] ?? 0, due.attempts],
    );
    if (!outcome.delivered) this.log(`sidecar: webhooks: delivery ${due.id} attempt ${due.attempts}: ${outcome.error}${outcome.status ? ` ${outcome.status}` : ""}${last ? "; failed for good" : ""}`);
  }
}
