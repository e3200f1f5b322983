/**
 * Every statement about image assets (schema.sql image_assets), for the edge's routes and the
 * sidecar's retention cleanup, and the asset row as the wire shows it (contract/images.ts).
 *
 *     const store = new ImageAssetStore(db);
 *     await store.create({...});                        // {row}, or {refused} past the account's limits
 *     const asset = await store.find(id, accountId);    // null: unknown, another account's, or expired
 *     const lease = await store.lease(id, accountId, ms);  // the attempt, "busy" (the account's completions at once), or null
 *     await store.finalize(id, lease, result);          // the ready (or rejected) row; null when the lease was lost
 *
 * An expired asset reads as absent everywhere, before cleanup has deleted it.
 */
import { z } from "zod";
import { imageObjects, type CanonicalImage, type ImageAsset, type ImageFormat, type ImagePurpose, type ImageRefusal } from "../contract/images.ts";
import { LIMITS } from "../contract/limits.ts";
import { Column, type Db } from "./db.ts";

/**
 * When an asset `a` expires: its `expires_at`, unless a training job has taken it (`training_id`):
 * then 'infinity' while that job runs, and LIMITS.imageTrainingRetentionMs after it ends.
 */
const EXPIRY = `CASE WHEN a.training_id IS NULL THEN a.expires_at ELSE (
    SELECT CASE WHEN training_status_terminal(t.status) THEN t.finished_at + make_interval(secs => ${LIMITS.imageTrainingRetentionMs / 1000})
                ELSE 'infinity'::timestamptz END
      FROM trainings t WHERE t.id = a.training_id) END`;

/** The row as the store reads it; `expires_at` is the effective expiry, null while a job holds the asset. */
const COLUMNS = `a.id, a.purpose, a.status, a.filename, a.source_bytes, a.sha256, a.created_at, NULLIF(${EXPIRY}, 'infinity') AS expires_at,
  a.upload_expires_at, a.lease_expires_at, a.attempts, a.source_format, a.source_width, a.source_height, a.canonical_attempt,
  a.canonical_width, a.canonical_height, a.canonical_bytes, a.canonical_sha256, a.error_code, a.error_message`;

const AssetRow = z.object({
  id: z.string(),
  purpose: z.enum(["prediction", "training"]),
  status: z.enum(["uploading", "ready", "rejected"]),
  filename: z.string(),
  source_bytes: Column.int,
  sha256: z.string(),
  created_at: Column.time,
  expires_at: Column.time.nullable(),
  upload_expires_at: Column.time,
  lease_expires_at: Column.time.nullable(),
  attempts: Column.int,
  source_format: z.enum(["jpeg", "png"]).nullable(),
  source_width: Column.int.nullable(),
  source_height: Column.int.nullable(),
  canonical_attempt: Column.int.nullable(),
  canonical_width: Column.int.nullable(),
  canonical_height: Column.int.nullable(),
  canonical_bytes: Column.int.nullable(),
  canonical_sha256: z.string().nullable(),
  error_code: z.string().nullable(),
  error_message: z.string().nullable(),
});
export type AssetRow = z.infer<typeof AssetRow>;

/** A held finalization lease: the attempt it numbers (its canonical object) and its token. */
export interface AssetLease {
  token: string;
  attempt: number;
  expiresAt: number;
}

export type Finalized =
  | { ok: true; source: { format: ImageFormat; width: number; height: number }; canonical: CanonicalImage }
  | { ok: false; code: ImageRefusal; message: string };

/** Where a ready asset's canonical PNG is, and what it must be. */
export interface CanonicalObject {
  object: string;
  bytes: number;
  sha256: string;
  /** Ms since the epoch; null while a training holds the asset. */
  expiresAt: number | null;
}

export class ImageAssetStore {
  constructor(private readonly db: Db) {}

  /**
   * Creates an asset of the account, or refuses it (`refused`: what is full, with the count) when the
   * account keeps LIMITS.imageAssetsStored assets or created LIMITS.imageAssetsPerMinute in the last
   * minute. The account's row is locked first, so concurrent creates (any key or session) cannot
   * both take the last place.
   */
  async create(asset: {
    id: string;
    accountId: string;
    purpose: ImagePurpose;
    filename: string;
    sourceBytes: number;
    sha256: string;
    expiresAt: Date;
    uploadExpiresAt: Date;
  }): Promise<{ row: AssetRow } | { refused: "stored" | "per_minute"; count: number }> {
    const stored = (account: string) => `(SELECT count(*) FROM image_assets WHERE account_id = ${account})`;
    const recent = (account: string) => `(SELECT count(*) FROM image_assets WHERE account_id = ${account} AND created_at > now() - interval '1 minute')`;
    const [, inserted = [], counts = []] = await this.db.transaction([
      { text: "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", params: [asset.accountId] },
      {
        text: `INSERT INTO image_assets AS a (id, account_id, purpose, filename, source_bytes, sha256, expires_at, upload_expires_at)
               SELECT $1, $2, $3, $4, $5, $6, $7, $8
                WHERE ${stored("$2")} < ${LIMITS.imageAssetsStored} AND ${recent("$2")} < ${LIMITS.imageAssetsPerMinute}
               RETURNING ${COLUMNS}`,
        params: [asset.id, asset.accountId, asset.purpose, asset.filename, asset.sourceBytes, asset.sha256, asset.expiresAt.toISOString(), asset.uploadExpiresAt.toISOString()],
      },
      { text: `SELECT ${stored("$1")} AS stored, ${recent("$1")} AS recent`, params: [asset.accountId] },
    ]);
    if (inserted[0]) return { row: AssetRow.parse(inserted[0]) };
    const { stored: kept, recent: made } = z.object({ stored: Column.int, recent: Column.int }).parse(counts[0]);
    return kept >= LIMITS.imageAssetsStored ? { refused: "stored", count: kept } : { refused: "per_minute", count: made };
  }

  /** The account's asset, or null for an unknown id, another account's asset, or an expired one. */
  async find(id: string, accountId: string): Promise<AssetRow | null> {
    const rows = await this.db.query(`SELECT ${COLUMNS} FROM image_assets a WHERE a.id = $1 AND a.account_id = $2 AND ${EXPIRY} > now()`, [id, accountId]);
    return rows[0] ? AssetRow.parse(rows[0]) : null;
  }

  /**
   * Of `ids`, those a training of the account may take: ready training assets, unexpired, held by no
   * other training that is still open (an asset of a finished training can be trained on again; it
   * then lives as long as the new training keeps it).
   */
  async trainable(ids: readonly string[], accountId: string, trainingId: string): Promise<Set<string>> {
    const rows = await this.db.query(
      `SELECT a.id FROM image_assets a
        WHERE a.id = ANY ($1::uuid[]) AND a.account_id = $2 AND a.purpose = 'training' AND a.status = 'ready' AND ${EXPIRY} > now()
          AND (a.training_id IS NULL OR a.training_id = $3
               OR (SELECT training_status_terminal(t.status) FROM trainings t WHERE t.id = a.training_id))`,
      [ids, accountId, trainingId],
    );
    return new Set(rows.map((row) => z.string().parse(row.id)));
  }

  /**
   * The canonical PNG of a ready asset of the account (any purpose), for a runtime's read: its object,
   * size and SHA-256, and when the asset expires (null: a training holds it); null when there is no
   * such asset, or it is not ready or has expired.
   */
  async canonical(id: string, accountId: string): Promise<CanonicalObject | null> {
    const rows = await this.db.query(
      `SELECT a.canonical_attempt, a.canonical_bytes, a.canonical_sha256, NULLIF(${EXPIRY}, 'infinity') AS expires_at FROM image_assets a
        WHERE a.id = $1 AND a.account_id = $2 AND a.status = 'ready' AND ${EXPIRY} > now()`,
      [id, accountId],
    );
    if (!rows[0]) return null;
    const row = z.object({ canonical_attempt: Column.int, canonical_bytes: Column.int, canonical_sha256: z.string(), expires_at: Column.time.nullable() }).parse(rows[0]);
    return { object: imageObjects.canonical(id, row.canonical_attempt), bytes: row.canonical_bytes, sha256: row.canonical_sha256, expiresAt: row.expires_at ? Date.parse(row.expires_at) : null };
  }

  /**
   * Takes the finalization lease of an uploading asset for `leaseMs`, numbering a new attempt. "busy":
   * the account's LIMITS.imageCompletionsAtOnce other completions hold leases now (counted under the
   * account's lock); null when another completion holds this one, or the asset is no longer uploading
   * (or has expired).
   */
  async lease(id: string, accountId: string, leaseMs: number): Promise<AssetLease | "busy" | null> {
    const token = crypto.randomUUID();
    const [, rows = [], busy = []] = await this.db.transaction([
      // The account's lock first: its completions at once are counted and taken one at a time.
      { text: "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", params: [accountId] },
      {
        text: `UPDATE image_assets a SET lease_token = $3, lease_expires_at = now() + make_interval(secs => $4::double precision / 1000), attempts = attempts + 1
                WHERE a.id = $1 AND a.account_id = $2 AND a.status = 'uploading' AND ${EXPIRY} > now()
                  AND lease_free(a.lease_expires_at)
                  AND (SELECT count(*) FROM image_assets o WHERE o.account_id = $2 AND o.lease_expires_at > now()) < ${LIMITS.imageCompletionsAtOnce}
                RETURNING a.attempts, a.lease_expires_at`,
        params: [id, accountId, token, leaseMs],
      },
      {
        text: `SELECT (SELECT count(*) FROM image_assets o WHERE o.account_id = $2 AND o.lease_expires_at > now() AND o.id <> $1) >= ${LIMITS.imageCompletionsAtOnce} AS busy`,
        params: [id, accountId],
      },
    ]);
    const row = rows[0] && z.object({ attempts: Column.int, lease_expires_at: Column.time }).parse(rows[0]);
    if (row) return { token, attempt: row.attempts, expiresAt: Date.parse(row.lease_expires_at) };
    return busy[0]?.busy === true ? "busy" : null;
  }

  /** Gives a lease up without a result (the sidecar failed): the next completion may take it at once. */
  async releaseLease(id: string, lease: AssetLease): Promise<void> {
    await this.db.query(`UPDATE image_assets SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_token = $2`, [id, lease.token]);
  }

  /**
   * Commits a finalization under its lease, once: the asset becomes ready (its canonical object is
   * the lease's attempt) or rejected. Null when the lease was lost (expired and taken, or finalized).
   */
  async finalize(id: string, lease: AssetLease, result: Finalized): Promise<AssetRow | null> {
    const rows = result.ok
      ? await this.db.query(
          `UPDATE image_assets a SET status = 'ready', finalized_at = now(), lease_token = NULL, lease_expires_at = NULL,
                  source_format = $3, source_width = $4, source_height = $5, canonical_attempt = $6,
                  canonical_width = $7, canonical_height = $8, canonical_bytes = $9, canonical_sha256 = $10
            WHERE id = $1 AND lease_token = $2 AND status = 'uploading' AND lease_expires_at > now()
            RETURNING ${COLUMNS}`,
          [id, lease.token, result.source.format, result.source.width, result.source.height, lease.attempt,
            result.canonical.width, result.canonical.height, result.canonical.bytes, result.canonical.sha256],
        )
      : await this.db.query(
          `UPDATE image_assets a SET status = 'rejected', finalized_at = now(), lease_token = NULL, lease_expires_at = NULL,
                  error_code = $3, error_message = $4
            WHERE id = $1 AND lease_token = $2 AND status = 'uploading' AND lease_expires_at > now()
            RETURNING ${COLUMNS}`,
          [id, lease.token, result.code, result.message],
        );
    return rows[0] ? AssetRow.parse(rows[0]) : null;
  }

  /**
   * Assets past their retention whose upload grant has lapsed and which no completion holds, oldest
   * first: what cleanup may delete now. Each comes with the objects it may have written.
   */
  async duePurge(limit: number): Promise<{ id: string; objects: string[] }[]> {
    const rows = await this.db.query(
      `SELECT a.id, a.attempts FROM image_assets a
        WHERE ${EXPIRY} <= now() AND a.upload_expires_at <= now() AND lease_free(a.lease_expires_at)
        ORDER BY a.created_at LIMIT $1`,
      [limit],
    );
    return rows.map((raw) => {
      const row = z.object({ id: z.string(), attempts: Column.int }).parse(raw);
      const canonicals = Array.from({ length: row.attempts }, (_, i) => imageObjects.canonical(row.id, i + 1));
      return { id: row.id, objects: [imageObjects.source(row.id), ...canonicals] };
    });
  }

  /** Deletes an asset's row once its objects are gone, unless a completion took a lease meanwhile. */
  async purge(id: string): Promise<void> {
    await this.db.query(
      `DELETE FROM image_assets a WHERE a.id = $1 AND ${EXPIRY} <= now() AND lease_free(a.lease_expires_at)`,
      [id],
    );
  }
}

/**
 * How long a read grant of an asset's image may last from `now`: LIMITS.imageReadGrantMs at most,
 * and never past the asset's life or the lease it serves. Whole seconds (a grant counts seconds); 0
 * when less than one is left.
 */
export function readGrantMs(now: number, assetExpiresAt: number, leaseExpiresAt: number): number {
  const ms = Math.min(LIMITS.imageReadGrantMs, assetExpiresAt - now, leaseExpiresAt - now);
  return Math.max(0, Math.floor(ms / 1000) * 1000);
}

/** The asset as the wire shows it (never a storage key, grant or lease). */
export function assetOf(row: AssetRow): ImageAsset {
  return {
    id: row.id,
    object: "image_asset",
    purpose: row.purpose,
    status: row.status,
    filename: row.filename,
    source_bytes: row.source_bytes,
    sha256: row.sha256,
    created_at: row.created_at,
    expires_at: row.expires_at,
    source:
      row.source_format !== null && row.source_width !== null && row.source_height !== null
        ? { format: row.source_format, width: row.source_width, height: row.source_height }
        : null,
    canonical:
      row.status === "ready" && row.canonical_width !== null && row.canonical_height !== null && row.canonical_bytes !== null && row.canonical_sha256 !== null
        ? { width: row.canonical_width, height: row.canonical_height, bytes: row.canonical_bytes, sha256: row.canonical_sha256 }
        : null,
    error: row.status === "rejected" && row.error_code !== null ? { code: row.error_code as ImageRefusal, message: row.error_message ?? "" } : null,
  };
}
