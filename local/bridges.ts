/**
 * The local Neon and Upstash protocol bridges as one child process (local/bridges-main.ts), for the
 * local stack (runs on a developer machine or in tests, never in production).
 *
 *     const bridges = await startBridges({ databaseUrl, redisUrl, upstashToken, logDir });
 *     bridges.neonBridge; // "127.0.0.1:<port>" (NEON_LOCAL_BRIDGE)
 */
import { join } from "node:path";
import { announced, start, type Child } from "./process.ts";
import { BUN, ROOT } from "./tiers.ts";

export interface Bridges {
  /** `127.0.0.1:<port>` of the Neon bridge (NEON_LOCAL_BRIDGE); null when none was asked for. */
  neonBridge: string | null;
  /** UPSTASH_REDIS_REST_URL. */
  upstashUrl: string;
  child: Child;
  stop(): Promise<void>;
}

/** `databaseUrl` null: no Neon bridge (the database is remote, reached at Neon's own endpoints). */
export async function startBridges(opts: { databaseUrl: string | null; redisUrl: string; upstashToken: string; logDir: string }): Promise<Bridges> {
  const logPath = join(opts.logDir, "bridges.log");
  let ready: { neonPort: number | null; upstashUrl: string } | undefined;
  const child = await start({
    name: "bridges",
    command: BUN,
    args: [join(ROOT, "local/bridges-main.ts")],
    env: { BRIDGES_DATABASE_URL: opts.databaseUrl ?? "", BRIDGES_REDIS_URL: opts.redisUrl, BRIDGES_UPSTASH_TOKEN: opts.upstashToken },
    logPath,
    ready: async (output) => (ready = announced<NonNullable<typeof ready>>(await output(), "BRIDGES READY ")) !== undefined,
  });
  return { neonBridge: ready!.neonPort === null ? null : `127.0.0.1:${ready!.neonPort}`, upstashUrl: ready!.upstashUrl, child, stop: child.stop };
}
