/**
 * The sidecar's health (only the edge calls it, with the sidecar secret): each of its links, checked
 * now: Postgres, then every runtime of the releases it serves, by the identity the runtime reports.
 *
 *   GET /internal/health -> {links: LinkStatus[]}
 */
import { Hono } from "hono";
import type { LinkStatus } from "../../contract/health.ts";
import { checkLink } from "../../server-shared/health.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import { SIDECAR_PATHS } from "../../server-shared/sidecar-protocol.ts";
import type { SidecarDeps } from "../app.ts";
import { runtimeOf, verifiedClient, verifiedRelease } from "../decide/identity.ts";
import { runtimeClientFor } from "../runtime/client.ts";
import { servedReleases } from "../runtime/registry.ts";

export function healthRoutes(deps: SidecarDeps): Hono {
  const app = new Hono();
  app.get(SIDECAR_PATHS.health, async (c) => {
    deps.metrics?.healthReports.inc();
    return c.json({ links: await healthLinks(deps) });
  });
  return app;
}

/** sidecar->postgres, then sidecar->runtime identity for every release this sidecar serves. */
async function healthLinks(deps: SidecarDeps): Promise<LinkStatus[]> {
  let entries: RegistryEntry[] = [];
  const postgres = await checkLink("sidecar->postgres", async () => {
    entries = await servedReleases(deps.pool, deps.selfUrl);
    return `${entries.length} release(s) served here`;
  });
  if (!postgres.ok) return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "registry unreadable" }];
  if (entries.length === 0) {
    return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "no serving release in the registry names this sidecar" }];
  }
  const runtimes = await Promise.all(
    entries.map((entry) =>
      checkLink(`sidecar->runtime ${entry.id}`, async () => {
        // The row checked as a decision would check it, then the runtime's own report of its identity.
        const release = await verifiedRelease(entry, entry);
        const identity = await verifiedClient(runtimeClientFor(entry, deps.secrets), runtimeOf(release)).identity(AbortSignal.timeout(2500));
        // The engine build that serves, and why not the others (runtime/gpu-probe.ts), for operators.
        return `${identity.release_id} fingerprint ${identity.fingerprint.slice(0, 12)}, engine ${identity.engine}`;
      }),
    ),
  );
  return [postgres, ...runtimes];
}
