/**
 * Wakes sidecars' job workers (runs in workerd and under Bun): POST /internal/jobs/wake to each
 * sidecar, with the sidecar secret, all at once. A worker that is idle then looks for work at once
 * instead of at its next poll (sidecar/jobs/worker.ts, JOB_TIMING.idleMs later). Only a hint: a wake
 * that fails costs that wait and nothing else, so failures are logged (the sidecar's host and the
 * error's name: nothing of its address that could hold a credential) and never thrown.
 *
 * The callers: the edge when a job is submitted (every sidecar of the registry, edge/wake.ts), and
 * the sidecar that validated a batch, for the other sidecars that serve its records (sidecar/bulk/validate.ts).
 *
 *     await wakeSidecars(await sidecarsToWake(db, { releases, except: selfUrl }), secret, log);
 */
import { LIMITS } from "../contract/limits.ts";
import { checkServiceUrl } from "../contract/urls.ts";
import type { Db } from "./db.ts";
import { SIDECAR_PATHS } from "./sidecar-protocol.ts";

/** How long one wake may take before it is given up. */
const WAKE_TIMEOUT_MS = 5000;

/**
 * The sidecars the registry names for serving releases (only those serving `releases` when given;
 * never `except`), the first LIMITS.wakeSidecars by address.
 */
export async function sidecarsToWake(db: Db, opts: { releases?: readonly string[]; except?: string } = {}): Promise<string[]> {
  const rows = await db.query(
    `SELECT DISTINCT sidecar_url FROM model_releases
      WHERE retired_at IS NULL AND sidecar_url IS NOT NULL AND ($1::text[] IS NULL OR id = ANY ($1)) AND sidecar_url IS DISTINCT FROM $2
      ORDER BY sidecar_url LIMIT $3`,
    [opts.releases ?? null, opts.except ?? null, LIMITS.wakeSidecars],
  );
  return rows.map((row) => String(row.sidecar_url));
}

export async function wakeSidecars(sidecarUrls: readonly string[], secret: string, log: (line: string) => void): Promise<void> {
  await Promise.all(
    sidecarUrls.map(async (sidecarUrl) => {
      let host = "a sidecar whose address is not a valid URL";
      try {
        const url = checkServiceUrl(sidecarUrl, "sidecar");
        host = url.host;
        const res = await fetch(new URL(SIDECAR_PATHS.wakeJobs, url), {
          method: "POST",
          headers: { authorization: `Bearer ${secret}` },
          redirect: "manual",
          signal: AbortSignal.timeout(WAKE_TIMEOUT_MS),
        });
        await res.body?.cancel();
        if (res.status !== 204) log(`waking the job workers of ${host}: HTTP ${res.status}`);
      } catch (err) {
        log(`waking the job workers of ${host}: ${err instanceof Error ? err.name : "error"}`);
      }
    }),
  );
}
