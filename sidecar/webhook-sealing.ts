/**
 * Keeps every webhook endpoint's secrets sealed under the first key of WEBHOOK_SECRET_KEY (runs in
 * the sidecar beside the webhook sender). At start, every hour, and when the key list is read again
 * (SIGHUP), a sweep seals under that key each secret still in the plain `whsec_` form of before
 * (rows written before secrets were sealed, or by an edge of before during an upgrade) or sealed
 * under another key of the list. That is how the plain rows of an existing database stop being
 * plain, and how a key rotation completes. An update applies only if the row still holds what the
 * sweep read, so sidecars sweeping at once, or an edge rotating an endpoint's secret meanwhile, lose
 * nothing; sweeping again changes nothing. A secret sealed under a key this sidecar does not hold is
 * counted, logged and left as it is.
 *
 *     const sealer = new SecretSealer({ pool, keyring: () => webhookKeyring(secrets.list("WEBHOOK_SECRET_KEY")!) });
 *     sealer.start();
 *     sealer.wake();        // after the key list was read again
 *     await sealer.stop();
 */
import type { Pool } from "@neondatabase/serverless";
import { z } from "zod";
import { UnreadableWebhookSecret, type WebhookKeyring } from "../server-shared/webhook-secrets.ts";
import { Periodic } from "./periodic.ts";

const SWEEP_EVERY_MS = 60 * 60_000;
/** Endpoints read per query of a sweep. */
const PAGE = 200;
const BEFORE_ANY_ID = "00000000-0000-0000-0000-000000000000";

export interface SweepOutcome {
  /** Endpoints whose secrets were sealed again under the current key. */
  sealed: number;
  /** Endpoints with a secret no key of the list opens, left as they are. */
  unreadable: number;
}

const Stored = z.object({ id: z.string(), secret: z.string(), previous_secret: z.string().nullable() });
type Stored = z.infer<typeof Stored>;

export class SecretSealer {
  private readonly loop: Periodic;
  private readonly log: (line: string) => void;

  constructor(private readonly deps: { pool: Pool; keyring: () => Promise<WebhookKeyring>; log?: (line: string) => void }) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.loop = new Periodic("sidecar: webhook secrets", SWEEP_EVERY_MS, async () => {
      await this.sweep();
      return false;
    }, this.log);
  }

  start(): void {
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Seals under the current key every secret not yet under it; says what it did when it did anything. */
  async sweep(): Promise<SweepOutcome> {
    const keys = await this.deps.keyring();
    const outcome: SweepOutcome = { sealed: 0, unreadable: 0 };
    for (let after = BEFORE_ANY_ID; ; ) {
      const rows = await this.notUnder(keys, after);
      for (const row of rows) {
        if (await this.reseal(keys, row)) outcome.sealed++;
        else outcome.unreadable++;
      }
      if (rows.length < PAGE) break;
      after = rows.at(-1)!.id;
    }
    if (outcome.sealed + outcome.unreadable > 0) {
      this.log(`sidecar: webhook secrets: ${outcome.sealed} endpoints sealed under key ${keys.currentId}; ${outcome.unreadable} sealed under a key WEBHOOK_SECRET_KEY does not hold`);
    }
    return outcome;
  }

  /** The next page of endpoints, by id after `after`, with a secret not sealed under the current key. */
  private async notUnder(keys: WebhookKeyring, after: string): Promise<Stored[]> {
    const { rows } = await this.deps.pool.query(
      `SELECT id, secret, previous_secret FROM webhook_endpoints
        WHERE id > $1 AND (secret NOT LIKE $2 OR previous_secret NOT LIKE $2)
        ORDER BY id LIMIT $3`,
      [after, `${keys.sealedPrefix}%`, PAGE],
    );
    return rows.map((row) => Stored.parse(row));
  }

  /** Seals one endpoint's secrets under the current key, if its row is unchanged since it was read; false when a key is missing. */
  private async reseal(keys: WebhookKeyring, row: Stored): Promise<boolean> {
    let secret: string;
    let previous: string | null;
    try {
      secret = await resealed(keys, row.id, row.secret);
      previous = row.previous_secret === null ? null : await resealed(keys, row.id, row.previous_secret);
    } catch (err) {
      if (err instanceof UnreadableWebhookSecret) return false;
      throw err;
    }
    await this.deps.pool.query(
      `UPDATE webhook_endpoints SET secret = $2, previous_secret = $3
        WHERE id = $1 AND secret = $4 AND previous_secret IS NOT DISTINCT FROM $5`,
      [row.id, secret, previous, row.secret, row.previous_secret],
    );
    return true;
  }
}

/** `stored` as it is when sealed under the current key already; otherwise opened and sealed under it. */
async function resealed(keys: WebhookKeyring, endpointId: string, stored: string): Promise<string> {
  return stored.startsWith(keys.sealedPrefix) ? stored : keys.seal(endpointId, await keys.open(endpointId, stored));
}
