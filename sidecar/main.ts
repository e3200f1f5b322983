/**
 * Sidecar entry point: `bun sidecar/main.ts`, one process per GPU host. Settings: sidecar/settings.ts.
 */
import { Pool } from "@neondatabase/serverless";
import { Redis } from "@upstash/redis";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { parseSettings } from "../server-shared/settings.ts";
import { createSidecarApp } from "./app.ts";
import { Lanes } from "./lanes.ts";
import { UsageWriter } from "./usage.ts";
import { BulkWorker, WORKER_TIMING } from "./bulk/worker.ts";
import { SidecarSettings } from "./settings.ts";

let settings: SidecarSettings;
try {
  settings = parseSettings("sidecar", SidecarSettings, process.env);
} catch (err) {
  console.error(`${(err as Error).message}; refusing to start`);
  process.exit(2);
}
useNeonRoute(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE));

const pool = new Pool({ connectionString: settings.DATABASE_URL, max: 4 });
// An idle connection dropped by the server must not crash the process.
pool.on("error", (err: Error) => console.error("sidecar: postgres pool error:", err.message));

const usage = new UsageWriter(pool);
const lanes = new Lanes();
const app = createSidecarApp({ pool, secret: settings.SIDECAR_SECRET, selfUrl: settings.SIDECAR_URL, env: process.env, lanes, usage });
const server = Bun.serve({ hostname: settings.SIDECAR_HOST, port: settings.SIDECAR_PORT, fetch: app.fetch });
console.log(`SIDECAR READY ${JSON.stringify({ port: server.port })}`);

const worker =
  settings.BULK_WORKER === "on"
    ? new BulkWorker({
        pool,
        lanes,
        redis: new Redis({ url: settings.UPSTASH_REDIS_REST_URL, token: settings.UPSTASH_REDIS_REST_TOKEN, retry: false, enableTelemetry: false }),
        selfUrl: settings.SIDECAR_URL,
        env: process.env,
        edge: { url: settings.EDGE_URL, secret: settings.SIDECAR_SECRET },
        timing: {
          leaseMs: settings.SVC_TEST_BULK_LEASE_MS ?? WORKER_TIMING.leaseMs,
          renewMs: settings.SVC_TEST_BULK_RENEW_MS ?? WORKER_TIMING.renewMs,
          idleMs: WORKER_TIMING.idleMs,
          cleanupEveryMs: settings.SVC_TEST_BULK_CLEANUP_EVERY_MS ?? WORKER_TIMING.cleanupEveryMs,
          retention: {
            dataMs: settings.SVC_TEST_BULK_DATA_RETENTION_MS ?? WORKER_TIMING.retention.dataMs,
            metadataMs: settings.SVC_TEST_BULK_METADATA_RETENTION_MS ?? WORKER_TIMING.retention.metadataMs,
          },
        },
      })
    : null;
worker?.start();

/**
 * A clean shutdown: stop the bulk worker (its step in flight is abandoned and its lease released),
 * stop taking requests, let those in flight answer, write every usage row, then close the pool.
 */
async function shutdown(): Promise<void> {
  await worker?.stop();
  await server.stop();
  await usage.flush();
  await pool.end().catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
