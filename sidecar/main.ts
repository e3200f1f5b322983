/**
 * Sidecar entry point: `bun sidecar/main.ts`, one process per GPU host.
 *
 * Settings (environment): SIDECAR_SECRET (shared with the edge), DATABASE_URL, SIDECAR_PORT,
 * SIDECAR_HOST (default 127.0.0.1), NEON_LOCAL_BRIDGE (local stack only), and each runtime secret
 * under the name its registry entry's `token_env` gives.
 */
import { Pool } from "@neondatabase/serverless";
import { useNeonLocalBridge } from "../contract/neon-local.ts";
import { createSidecarApp } from "./app.ts";
import { Lanes } from "./lanes.ts";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    console.error(`sidecar: ${name} is required`);
    process.exit(2);
  }
  return value;
}

const secret = required("SIDECAR_SECRET");
const databaseUrl = required("DATABASE_URL");
const port = Number(required("SIDECAR_PORT"));
useNeonLocalBridge(process.env.NEON_LOCAL_BRIDGE);

const pool = new Pool({ connectionString: databaseUrl, max: 4 });
// An idle connection dropped by the server must not crash the process.
pool.on("error", (err: Error) => console.error("sidecar: postgres pool error:", err.message));

const app = createSidecarApp({ pool, secret, env: process.env, lanes: new Lanes() });
const server = Bun.serve({ hostname: process.env.SIDECAR_HOST ?? "127.0.0.1", port, fetch: app.fetch });
console.log(`SIDECAR READY ${JSON.stringify({ port: server.port })}`);

async function shutdown(): Promise<void> {
  await server.stop();
  await pool.end().catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
