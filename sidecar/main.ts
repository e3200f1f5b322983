/**
 * Sidecar entry point: `bun sidecar/main.ts`, one process per GPU host. Settings: sidecar/settings.ts.
 */
import { Pool } from "@neondatabase/serverless";
import { useNeonLocalBridge } from "../server-shared/neon-local.ts";
import { parseSettings } from "../server-shared/settings.ts";
import { createSidecarApp } from "./app.ts";
import { Lanes } from "./lanes.ts";
import { UsageWriter } from "./usage.ts";
import { SidecarSettings } from "./settings.ts";

let settings: SidecarSettings;
try {
  settings = parseSettings("sidecar", SidecarSettings, process.env);
} catch (err) {
  console.error(`${(err as Error).message}; refusing to start`);
  process.exit(2);
}
useNeonLocalBridge(settings.NEON_LOCAL_BRIDGE);

const pool = new Pool({ connectionString: settings.DATABASE_URL, max: 4 });
// An idle connection dropped by the server must not crash the process.
pool.on("error", (err: Error) => console.error("sidecar: postgres pool error:", err.message));

const usage = new UsageWriter(pool);
const app = createSidecarApp({ pool, secret: settings.SIDECAR_SECRET, selfUrl: settings.SIDECAR_URL, env: process.env, lanes: new Lanes(), usage });
const server = Bun.serve({ hostname: settings.SIDECAR_HOST, port: settings.SIDECAR_PORT, fetch: app.fetch });
console.log(`SIDECAR READY ${JSON.stringify({ port: server.port })}`);

/** A clean shutdown: stop taking requests, let those in flight answer, write every usage row, then close the pool. */
async function shutdown(): Promise<void> {
  await server.stop();
  await usage.flush();
  await pool.end().catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
