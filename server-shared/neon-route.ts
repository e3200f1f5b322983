/**
 * Where the Neon driver sends a tier's database traffic (edge in workerd, sidecar under Bun), decided
 * by DATABASE_URL's host alone:
 *
 *   - a remote database is Neon: the driver's own endpoints, over TLS (`https://api.<region>…/sql`
 *     for HTTP queries, `wss://<host>/v2` for pooled connections). NEON_LOCAL_BRIDGE is refused.
 *   - a loopback database is the local stack's plain Postgres, which the driver reaches only through
 *     the local Neon bridge (local/neon-bridge.ts) named by NEON_LOCAL_BRIDGE (`127.0.0.1:<port>`).
 *
 *     useNeonRoute(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE));
 */
import { neonConfig, type NeonConfig } from "@neondatabase/serverless";
import type { z } from "zod";
import { isLoopbackHost } from "../contract/urls.ts";

export type NeonRoute = { via: "neon" } | { via: "bridge"; bridge: string };

/** A DATABASE_URL and NEON_LOCAL_BRIDGE that do not make a route; `setting` names the one to fix. */
export class NeonRouteError extends Error {
  constructor(
    readonly setting: "DATABASE_URL" | "NEON_LOCAL_BRIDGE",
    readonly problem: string,
  ) {
    super(`setting ${setting} ${problem}`);
  }
}

/** The route for `databaseUrl` (a postgres:// URL) and the bridge setting, or a NeonRouteError. */
export function neonRoute(databaseUrl: string, bridge: string | undefined): NeonRoute {
  let host: string;
  try {
    host = new URL(databaseUrl).hostname;
  } catch {
    throw new NeonRouteError("DATABASE_URL", "is not a valid postgres:// URL");
  }
  if (host !== "" && !isLoopbackHost(host)) {
    if (bridge) throw new NeonRouteError("NEON_LOCAL_BRIDGE", "must be unset for a remote DATABASE_URL, which is reached at Neon's own endpoints");
    return { via: "neon" };
  }
  if (!bridge) throw new NeonRouteError("NEON_LOCAL_BRIDGE", "is required for a loopback DATABASE_URL: the Neon driver reaches a local Postgres only through the local bridge");
  const [bridgeHost = "", port = ""] = bridge.split(/:(?=\d+$)/);
  if (!isLoopbackHost(bridgeHost) || !/^\d{1,5}$/.test(port)) throw new NeonRouteError("NEON_LOCAL_BRIDGE", "must be a loopback host:port");
  return { via: "bridge", bridge };
}

/** The same check inside a tier's settings schema: `.superRefine(checkNeonRoute)`. */
export function checkNeonRoute(settings: { DATABASE_URL: string; NEON_LOCAL_BRIDGE?: string | undefined }, ctx: z.RefinementCtx): void {
  try {
    neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE);
  } catch (err) {
    if (!(err instanceof NeonRouteError)) throw err;
    ctx.addIssue({ code: "custom", path: [err.setting], message: err.problem });
  }
}

// The driver's own settings, as loaded: what a Neon route puts back.
const NEON_DEFAULTS = {
  wsProxy: neonConfig.wsProxy,
  useSecureWebSocket: neonConfig.useSecureWebSocket,
  pipelineTLS: neonConfig.pipelineTLS,
  pipelineConnect: neonConfig.pipelineConnect,
  fetchEndpoint: neonConfig.fetchEndpoint,
};

/** Points the driver (process-wide) along `route`. */
export function useNeonRoute(
  route: NeonRoute,
  /** Only Node 20 needs one (it has no global WebSocket); workerd and Bun use their own. */
  webSocketConstructor?: NeonConfig["webSocketConstructor"],
): void {
  if (webSocketConstructor) neonConfig.webSocketConstructor = webSocketConstructor;
  // Each write goes out at once. The driver's default coalesces a query's messages by holding them
  // for a setTimeout(0), which Bun and Node clamp to a millisecond: 1.3 ms a query instead of 0.15
  // through the local bridge (the same wait in front of Neon), more than a GPU pass takes.
  neonConfig.coalesceWrites = false;
  if (route.via === "neon") {
    Object.assign(neonConfig, NEON_DEFAULTS);
    return;
  }
  // The bridge speaks plaintext, which only loopback may.
  neonConfig.wsProxy = (host, port) => `${route.bridge}/v2?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.fetchEndpoint = `http://${route.bridge}/sql`;
}
