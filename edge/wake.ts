/**
 * Wakes the sidecars' job workers when a job is submitted (runs in workerd, beside the answer, which
 * never waits for it: `waitUntil`): each sidecar the registry names, the first LIMITS.wakeSidecars by
 * address, so that a small batch or a training starts without waiting for a worker's next poll
 * (server-shared/wake.ts).
 *
 *     const submitted = await store.submit(...);
 *     if (submitted) wakeJobWorkers(c);
 */
import type { Context } from "hono";
import { LIMITS } from "../contract/limits.ts";
import { loggable } from "../server-shared/errors.ts";
import { wakeSidecars } from "../server-shared/wake.ts";
import type { AppEnv } from "./env.ts";
import { services } from "./services.ts";

export function wakeJobWorkers(c: Context<AppEnv>): void {
  const { sql, settings } = services(c.env);
  const log = (line: string) => console.error(`edge: ${line}`);
  const wake = async () => {
    const rows = await sql.query(
      "SELECT DISTINCT sidecar_url FROM model_releases WHERE retired_at IS NULL AND sidecar_url IS NOT NULL ORDER BY sidecar_url LIMIT $1",
      [LIMITS.wakeSidecars],
    );
    await wakeSidecars(
      rows.map((row) => String(row.sidecar_url)),
      settings.SIDECAR_SECRET.send,
      log,
    );
  };
  c.executionCtx.waitUntil(wake().catch((err) => log(`waking the job workers: the registry could not be read: ${loggable(err)}`)));
}
