/**
 * The webhook sender (runs in the sidecar beside the job workers): takes due deliveries from the
 * outbox (schema.sql webhook_deliveries, written in the transaction of the job's change), POSTs each
 * to its endpoint signed in the Standard Webhooks format, and records the outcome: delivered on a
 * 2xx, otherwise tried again after the next wait of WEBHOOK_LIMITS.retryDelaysMs, failed after the
 * last. Several sidecars may send at once: a delivery is leased to one attempt, and a sender that
 * dies mid-attempt leaves it to be taken again when its lease ends, so each event arrives at least
 * once; receivers drop repeats by `webhook-id`.
 *
 * Fairness. A sender runs up to SENDER_IN_FLIGHT attempts at once, each on its own: the moment one
 * ends, its place goes to the next due delivery. A delivery is leased only while its endpoint and its
 * account have fewer attempts in flight than WEBHOOK_LIMITS.inFlight allows, counted over every
 * sidecar by the unexpired leases; leasing takes one advisory lock, so two sidecars cannot both take
 * the last place. An account whose endpoints hang thus holds a few places, and every other account's
 * deliveries go out beside it. An attempt's deadline (`attemptBudgetMs`: its timeout, or half its
 * lease when that is shorter) covers resolving the name, connecting and the answer, so it never
 * outlives its lease.
 *
 * Before each attempt the endpoint's address is checked again (contract/webhooks.ts): with
 * `privateTargets` off (production), every address its name resolves to must be public, and the
 * request goes to the address checked (`pinned`: TLS still verifies the certificate against the
 * name), so a name that answers a public address to the check and a private one a moment later
 * (DNS rebinding) reaches nothing private. The endpoint's secret is stored sealed
 * (server-shared/webhook-secrets.ts) and opened for the attempt only; a delivery whose secret no key
 * of WEBHOOK_SECRET_KEY opens waits, uncounted, for one that does.
 *
 *     const sender = new WebhookSender({ pool, privateTargets: false, keyring: () => webhookKeyring(keys) });
 *     sender.start();
 *     await sender.stop();   // the attempts in flight finish first
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { Pool } from "@neondatabase/serverless";
import { z } from "zod";
import { signWebhook } from "../contract/webhook-signature.ts";
import { checkWebhookUrl, isIpLiteral, isPublicAddress, unbracket, WEBHOOK_LIMITS } from "../contract/webhooks.ts";
import { Column, poolDb } from "../server-shared/db.ts";
import { loggable } from "../server-shared/errors.ts";
import { UnreadableWebhookSecret, type WebhookKeyring } from "../server-shared/webhook-secrets.ts";
import { Periodic } from "./periodic.ts";

/** How often the outbox is read when the last read found nothing that may be taken. */
const POLL_MS = 1000;
/** Attempts one sender runs at once, whatever their accounts: a bound on its sockets and memory. */
export const SENDER_IN_FLIGHT = 32;
/** An attempt's lease: its timeout and a margin to record its outcome. */
export const WEBHOOK_LEASE_MS = WEBHOOK_LIMITS.attemptTimeoutMs + 20_000;
/** The advisory lock every sidecar's leasing takes in turn (ops/migrate.ts holds 7_245_001). */
const LEASE_LOCK = 7_245_014;
/** How long a delivery whose secret this sidecar cannot open waits before it is taken again. */
const UNREADABLE_WAIT_MS = 60_000;

/** How long an attempt may run under a lease of `leaseMs`: half the lease is left to record its outcome. */
export const attemptBudgetMs = (leaseMs: number) => Math.min(WEBHOOK_LIMITS.attemptTimeoutMs, leaseMs / 2);

/** Resolves a host name to every address it has (node:dns's `lookup` with `all`). */
export type Lookup = (hostname: string) => Promise<string[]>;
const systemLookup: Lookup = async (hostname) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

export interface WebhookSenderDeps {
  pool: Pool;
  /** The local stack's WEBHOOK_PRIVATE_TARGETS: loopback and private receivers allowed. Off in production. */
  privateTargets: boolean;
  /** The keys of WEBHOOK_SECRET_KEY as read now (a reload may change them). */
  keyring: () => Promise<WebhookKeyring>;
  leaseMs?: number;
  lookup?: Lookup;
  log?: (line: string) => void;
  /** Told of each attempt's outcome (the sidecar's svc_webhook_attempts_total). */
  attempted?: (delivered: boolean) => void;
}

/** A delivery as leased: its endpoint's secrets still sealed. */
const Leased = z.object({
  id: z.string(),
  event_id: z.string(),
  endpoint_id: z.string(),
  body: z.string(),
  attempts: Column.int,
  url: z.string(),
  secret: z.string(),
  previous_secret: z.string().nullable(),
});
type Leased = z.infer<typeof Leased>;

/** A delivery ready to send: the secrets that sign it, opened. */
export type Due = Omit<Leased, "endpoint_id">;

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

/**
 * Leases the due delivery waiting longest among those whose endpoint and account have places left
 * (in flight: an unexpired lease, whichever sidecar holds it). Run under LEASE_LOCK, each statement
 * of the transaction seeing what was committed before the lock was granted.
 */
const LEASE_NEXT = `
  WITH busy AS (
    SELECT b.endpoint_id, e.account_id
      FROM webhook_deliveries b JOIN webhook_endpoints e ON e.id = b.endpoint_id
     WHERE b.status = 'pending' AND b.lease_expires_at > now()
  ), next AS (
    SELECT w.id
      FROM webhook_deliveries w JOIN webhook_endpoints e ON e.id = w.endpoint_id
     WHERE w.status = 'pending' AND w.next_attempt_at <= now() AND lease_free(w.lease_expires_at)
       AND (SELECT count(*) FROM busy WHERE busy.endpoint_id = w.endpoint_id) < $2
       AND (SELECT count(*) FROM busy WHERE busy.account_id = e.account_id) < $3
     ORDER BY w.next_attempt_at
     LIMIT 1
     FOR UPDATE OF w SKIP LOCKED
  )
  UPDATE webhook_deliveries d
     SET lease_expires_at = now() + make_interval(secs => $1::double precision / 1000), attempts = d.attempts + 1, last_attempt_at = now()
    FROM next, webhook_endpoints e
   WHERE d.id = next.id AND e.id = d.endpoint_id
  RETURNING d.id, d.event_id, d.endpoint_id, d.payload::text AS body, d.attempts, e.url, e.secret,
            CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END AS previous_secret`;

export class WebhookSender {
  private readonly log: (line: string) => void;
  private readonly lookup: Lookup;
  private readonly loop: Periodic;
  private readonly leaseMs: number;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly deps: WebhookSenderDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.lookup = deps.lookup ?? systemLookup;
    this.leaseMs = deps.leaseMs ?? WEBHOOK_LEASE_MS;
    this.loop = new Periodic("sidecar: webhooks", POLL_MS, () => this.fill(), this.log);
  }

  start(): void {
    this.loop.start();
  }

  /** Takes no more deliveries; the attempts in flight finish first. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.inFlight);
  }

  /**
   * Gives every free place a due delivery, until none is free or none may be taken; the loop runs
   * it again when an attempt ends (a place, and maybe its account's, freed) or after POLL_MS.
   */
  private async fill(): Promise<boolean> {
    while (this.inFlight.size < SENDER_IN_FLIGHT) {
      const leased = await this.lease();
      if (!leased) return false;
      this.begin(leased);
    }
    return false;
  }

  private async lease(): Promise<Leased | null> {
    const [, rows] = await poolDb(this.deps.pool).transaction([
      { text: "SELECT pg_advisory_xact_lock($1)", params: [LEASE_LOCK] },
      { text: LEASE_NEXT, params: [this.leaseMs, WEBHOOK_LIMITS.inFlight.perEndpoint, WEBHOOK_LIMITS.inFlight.perAccount] },
    ]);
    return rows?.[0] ? Leased.parse(rows[0]) : null;
  }

  /** Runs one leased delivery in a place of its own, and wakes the loop when it ends. */
  private begin(leased: Leased): void {
    const running: Promise<void> = this.send(leased)
      .catch((err: unknown) => this.log(`sidecar: webhooks: delivery ${leased.id}: ${loggable(err)}`))
      .finally(() => {
        this.inFlight.delete(running);
        this.loop.wake();
      });
    this.inFlight.add(running);
  }

  private async send(leased: Leased): Promise<void> {
    let due: Due;
    try {
      due = await this.open(leased);
    } catch (err) {
      // A key list read again with a bad entry fails here too: the delivery waits for it to be mended.
      return this.putBack(leased, err instanceof UnreadableWebhookSecret ? err.message : `cannot be opened (${loggable(err)})`);
    }
    const outcome = await this.attempt(due);
    this.deps.attempted?.(outcome.delivered);
    await this.record(due, outcome);
  }

  /** The delivery with its endpoint's secrets opened. */
  private async open({ endpoint_id, ...due }: Leased): Promise<Due> {
    const keys = await this.deps.keyring();
    const previous = due.previous_secret === null ? null : await keys.open(endpoint_id, due.previous_secret);
    return { ...due, secret: await keys.open(endpoint_id, due.secret), previous_secret: previous };
  }

  /** Gives back, uncounted, a delivery whose secret no key here opens: it waits for a sidecar (or a reload) that holds the key. */
  private async putBack(leased: Leased, why: string): Promise<void> {
    await this.deps.pool.query(
      `UPDATE webhook_deliveries
          SET attempts = attempts - 1, lease_expires_at = NULL, next_attempt_at = now() + make_interval(secs => $3::double precision / 1000)
        WHERE id = $1 AND status = 'pending' AND attempts = $2`,
      [leased.id, leased.attempts, UNREADABLE_WAIT_MS],
    );
    this.log(`sidecar: webhooks: delivery ${leased.id}: endpoint ${leased.endpoint_id}'s secret ${why}; not attempted, it waits`);
  }

  /** One POST of a delivery, signed for this attempt and ended at its deadline, name resolution included; never throws. */
  async attempt(due: Due): Promise<AttemptOutcome> {
    const deadline = AbortSignal.timeout(attemptBudgetMs(this.leaseMs));
    const checked = checkWebhookUrl(due.url, { privateTargets: this.deps.privateTargets });
    if ("error" in checked) return { delivered: false, status: null, error: "address_not_allowed" };
    let request: Pinned = { target: checked.url, host: {}, tls: {} };
    if (!this.deps.privateTargets) {
      let addresses: string[];
      try {
        addresses = await beforeDeadline(this.lookup(unbracket(checked.url.hostname)), deadline);
      } catch {
        return { delivered: false, status: null, error: deadline.aborted ? "timeout" : "connection_failed" };
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
        signal: deadline,
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

/** `work`, or its rejection once `deadline` aborts: a name lookup cannot be cancelled, only no longer waited for. */
function beforeDeadline<T>(work: Promise<T>, deadline: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(deadline.reason as Error);
    if (deadline.aborted) return abort();
    deadline.addEventListener("abort", abort, { once: true });
    work.then(resolve, reject).finally(() => deadline.removeEventListener("abort", abort));
  });
}
