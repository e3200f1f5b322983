/**
 * What the decisions route read for an API key, kept in the isolate (runs in workerd): the key's row
 * as `keyAndModel` read it (digest, scope, its account's status and quota settings) and the releases
 * the model names it was asked for resolved to. A decision whose key and model are kept skips the
 * edge's Postgres round trip: the edge checks the presented secret against the kept digest (no I/O),
 * admits the quota and forwards the decision with `confirm`, and the sidecar reads the key and the
 * model in Postgres while the passes run, answering only if they still stand
 * (server-shared/key-check.ts). When they do not, the edge forgets the key and reads it again, so
 * revocation, a disabled account, an expired key or a moved alias apply on the very next request.
 *
 * The account's quota settings (requests and tokens per second) are read from the kept row and not
 * confirmed: an operator's change applies to a kept key within KEY_CACHE_MS.
 *
 * Only accepted keys are kept, for at most KEY_CACHE_MS (and never past the key's expiry), and at
 * most KEY_CACHE_ENTRIES keys per isolate (the oldest is dropped first). Nothing is shared between
 * isolates; an isolate's first request of a key reads it.
 *
 *     const kept = keptKey(key.id, request.model);          // { key, model } or null
 *     keepKey(key.id, request.model, found.key, found.model);
 *     forgetKey(key.id);
 */
import type { Resolution } from "../models.ts";

/** How long a kept key is answered from before it is read again whatever happens. */
export const KEY_CACHE_MS = 60_000;
export const KEY_CACHE_ENTRIES = 10_000;

interface Kept {
  row: Record<string, unknown>;
  models: Map<string, Resolution>;
  until: number;
}

const kept = new Map<string, Kept>();

/** The key's row and the model's resolution as last read, when both are kept and fresh. */
export function keptKey(keyId: string, model: string): { key: Record<string, unknown>; model: Resolution } | null {
  const entry = kept.get(keyId);
  if (!entry || !entry.models.has(model)) return null;
  if (Date.now() >= entry.until) {
    kept.delete(keyId);
    return null;
  }
  return { key: entry.row, model: entry.models.get(model)! };
}

/**
 * Keeps an accepted key's row and the text release `model` resolved to, one a sidecar serves (a name
 * that resolves to nothing is never kept: a model made available applies on the next request).
 * `expiresAt`: the key's own expiry (ms since the epoch), which the entry never outlives. A row read
 * again replaces the kept one.
 */
export function keepKey(keyId: string, model: string, row: Record<string, unknown>, resolution: Resolution, expiresAt: number | null): void {
  const entry = kept.get(keyId);
  if (entry && entry.row.digest === row.digest && Date.now() < entry.until) {
    entry.row = row;
    entry.models.set(model, resolution);
    return;
  }
  kept.delete(keyId);
  if (kept.size >= KEY_CACHE_ENTRIES) kept.delete(kept.keys().next().value!);
  kept.set(keyId, { row, models: new Map([[model, resolution]]), until: Math.min(Date.now() + KEY_CACHE_MS, expiresAt ?? Infinity) });
}

export function forgetKey(keyId: string): void {
  kept.delete(keyId);
}
