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
import { httpDb } from "../server-shared/db.ts";
import { loggable } from "../server-shared/errors.ts";
import { sidecarsToWake, wakeSidecars } from "../server-shared/wake.ts";
import type { AppEnv } from "./env.ts";
import { services } from "./services.ts";

export function wakeJobWorkers(c: Context<AppEnv>): void {
  const { sql, settings } = services(c.env);
  const log = (line: string) => console.error(`edge: ${line}`);
  const wake = async () => wakeSidecars(await sidecarsToWake(httpDb(sql)), settings.SIDECAR_SECRET.send, log);
  c.executionCtx.waitUntil(wake().catch((err) => log(`waking the job workers: the registry could not be read: ${loggable(err)}`)));
}
