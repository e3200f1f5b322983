/**
 * The sidecar's HTTP surface (runs under Bun on the GPU host). Only the edge calls it, with the shared
 * sidecar secret; nothing here is reachable with a customer credential.
 */
import { Hono } from "hono";
import type { Pool } from "@neondatabase/serverless";
import { bearerToken, secretsEqual } from "../contract/crypto.ts";
import { errorBody } from "../contract/errors.ts";
import { checkLink, type LinkStatus } from "../contract/health.ts";
import { RegistryEntry, SELECT_SERVING_RELEASES } from "../contract/registry.ts";
import { identityMatches, runtimeClientFor } from "./runtime/client.ts";

export interface SidecarDeps {
  pool: Pool;
  secret: string;
  /** Where runtime secrets are read from (the variable a registry entry's `token_env` names). */
  env: Record<string, string | undefined>;
}

export function createSidecarApp(deps: SidecarDeps): Hono {
  const app = new Hono();

  app.use("/internal/*", async (c, next) => {
    const token = bearerToken(c.req.header("authorization"));
    if (!token || !(await secretsEqual(token, deps.secret))) {
      return c.json(errorBody("unauthorized", "sidecar secret missing or wrong"), 401);
    }
    await next();
  });

  app.get("/internal/health", async (c) => c.json({ links: await healthLinks(deps) }));

  app.notFound((c) => c.json(errorBody("not_found", "no such sidecar route"), 404));
  app.onError((err, c) => {
    console.error("sidecar error:", err.message);
    return c.json(errorBody("internal_error", "sidecar internal error"), 500);
  });
  return app;
}

/** sidecar->postgres, then sidecar->runtime identity for every serving release. */
async function healthLinks(deps: SidecarDeps): Promise<LinkStatus[]> {
  let entries: RegistryEntry[] = [];
  const postgres = await checkLink("sidecar->postgres", async () => {
    const { rows } = await deps.pool.query(SELECT_SERVING_RELEASES);
    entries = rows.map((row) => RegistryEntry.parse(row));
    return `${entries.length} serving release(s)`;
  });
  if (!postgres.ok) return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "registry unreadable" }];
  if (entries.length === 0) {
    return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "no serving release in the registry" }];
  }
  const runtimes = await Promise.all(
    entries.map((entry) =>
      checkLink(`sidecar->runtime ${entry.id}`, async () => {
        const identity = await runtimeClientFor(entry, deps.env).identity(AbortSignal.timeout(2500));
        if (!identityMatches(entry, identity)) {
          throw new Error(`identity mismatch: runtime serves ${identity.release_id} (${identity.fingerprint.slice(0, 12)})`);
        }
        return `${identity.release_id} fingerprint ${identity.fingerprint.slice(0, 12)}`;
      }),
    ),
  );
  return [postgres, ...runtimes];
}
