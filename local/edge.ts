/**
 * The edge Worker on loopback, for the local stack (runs on a developer machine or in tests, never
 * in production; production runs the same bundle on Cloudflare). Two ways:
 *
 *   - "miniflare" (the default): the bundle `wrangler deploy` would upload, under Miniflare's own API
 *     (local/edge-main.ts). One workerd process answers; nothing relays or logs its fetches.
 *   - "wrangler-dev": `wrangler dev`, which rebuilds on every edit of edge/. It passes each request
 *     through a proxy Worker in a second workerd process and relays every outbound fetch through its
 *     Node process, which costs the model CPU on a small machine (bench:decisions measures both).
 *
 *     const edge = await startEdge({ kind: "miniflare", port, envFile, dataDir, logDir });
 */
import { readlinkSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "./ports.ts";
import { start, type Child } from "./process.ts";
import { BUN, ROOT } from "./tiers.ts";

export const EDGE_KINDS = ["miniflare", "wrangler-dev"] as const;
export type EdgeKind = (typeof EDGE_KINDS)[number];

export interface EdgeOptions {
  kind: EdgeKind;
  port: number;
  /** The Worker's settings as KEY=value lines (mode 0600). */
  envFile: string;
  /** The stack's data directory: R2's local data (shared by both kinds), the bundle, wrangler's state. */
  dataDir: string;
  logDir: string;
  /** Log file name under `logDir`; "edge.log" when absent. */
  logName?: string;
}

/** R2's local data under a stack's data directory, where `wrangler dev --persist-to` puts it. */
export function r2Dir(dataDir: string): string {
  return join(dataDir, "wrangler", "v3", "r2");
}

export async function startEdge(opts: EdgeOptions): Promise<Child> {
  const baseUrl = `http://127.0.0.1:${opts.port}`;
  const common = {
    cwd: ROOT,
    logPath: join(opts.logDir, opts.logName ?? "edge.log"),
    // The Worker answers 404 to an unknown path once it serves.
    ready: async () => (await fetch(`${baseUrl}/__ready`)).status === 404,
    timeoutMs: 90_000,
  };
  if (opts.kind === "miniflare") {
    return start({
      ...common,
      name: "edge",
      command: BUN,
      args: [join(ROOT, "local/edge-main.ts")],
      env: { EDGE_PORT: String(opts.port), EDGE_ENV_FILE: opts.envFile, EDGE_DATA_DIR: opts.dataDir },
    });
  }
  return start({
    ...common,
    name: "edge",
    // wrangler needs Node; under Bun (npm start) the `node` on PATH runs it.
    command: process.versions.bun ? "node" : process.execPath,
    args: [
      join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "dev",
      "--config", join(ROOT, "wrangler.toml"),
      "--ip", "127.0.0.1",
      "--port", String(opts.port),
      "--inspector-port", String(await freePort()),
      "--persist-to", join(opts.dataDir, "wrangler"),
      "--env-file", opts.envFile,
      "--show-interactive-dev-session=false",
      // warn: the operator lines (console.error) without wrangler's request lines, whose URLs may be signed grants.
      "--log-level", "warn",
    ],
    env: {
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      WRANGLER_SEND_METRICS: "false",
      XDG_CONFIG_HOME: join(opts.dataDir, "config"),
      WRANGLER_LOG_PATH: discardedLog(opts.dataDir),
      CI: "true",
    },
  });
}

/**
 * A `.log` path that discards what is written to it (wrangler takes a path ending in `.log` as the
 * file itself). wrangler appends every message of every level to its debug file, outgoing fetch
 * responses included (decision answers, SQL results): real-time bodies must not be logged, so that
 * file is /dev/null. Its console output (edge.log) keeps the operator's lines.
 */
export function discardedLog(dataDir: string): string {
  const path = join(dataDir, "wrangler-debug.log");
  rmSync(path, { force: true });
  try {
    symlinkSync("/dev/null", path);
  } catch (err) {
    // Another edge starting over the same data directory (stack.addEdge) made the same link meanwhile.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST" || readlinkSync(path) !== "/dev/null") throw err;
  }
  return path;
}
