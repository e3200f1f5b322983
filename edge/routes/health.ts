/**
 * GET /health: proves every link of the service with a real call and says which one is down.
 * Unauthenticated by design (load balancers and the README's first curl use it); it reports statuses,
 * latencies and release ids, never addresses or secrets.
 *
 * Every sidecar that the registry names for a serving release is probed, and reports its own links
 * (sidecar->postgres, sidecar->runtime per release it serves). With several sidecars, each one's
 * links carry a ` #n` suffix, numbered in the order of the releases they serve.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../env.ts";
import { errorBody } from "../../contract/errors.ts";
import type { HealthReport, LinkStatus } from "../../contract/health.ts";
import { checkLink } from "../../server-shared/health.ts";
import { SIDECAR_PATHS, SidecarHealth } from "../../server-shared/sidecar-protocol.ts";
import { services, sidecarFetch, type Services } from "../services.ts";

export const health = new Hono<AppEnv>();

const PROBE_KEY = "health/probe";

/** A sidecar address with the releases the registry assigns to it. */
const SidecarRow = z.object({ sidecar_url: z.string(), releases: z.array(z.string()) }).transform((row) => ({ url: row.sidecar_url, releases: row.releases }));

health.get("/health", async (c) => {
  const { sql, redis, settings } = services(c.env);
  let sidecars: { url: string; releases: string[] }[] = [];
  const edgeLinks = await Promise.all([
    checkLink("edge->postgres", async () => {
      const rows = await sql`
        SELECT sidecar_url, array_agg(id ORDER BY id) AS releases
          FROM model_releases WHERE retired_at IS NULL AND sidecar_url IS NOT NULL
         GROUP BY sidecar_url ORDER BY min(id)`;
      sidecars = rows.map((row) => SidecarRow.parse(row));
    }),
    checkLink("edge->redis", async () => {
      const answer = await redis.ping();
      if (answer !== "PONG") throw new Error(`unexpected PING answer ${answer}`);
    }),
    checkLink("edge->r2", async () => {
      const stamp = crypto.randomUUID();
      await c.env.BUCKET.put(PROBE_KEY, stamp);
      const read = await c.env.BUCKET.get(PROBE_KEY);
      if ((await read?.text()) !== stamp) throw new Error("object read back differs from what was written");
    }),
  ]);
  const registryRead = edgeLinks[0]!.ok;
  const links = [...edgeLinks, ...(registryRead ? await sidecarLinks(settings, sidecars) : [unknownSidecars])];
  const down = links.filter((link) => !link.ok);
  if (down.length === 0) return c.json({ status: "ok", links } satisfies HealthReport);
  const message = down.map((link) => `${link.name}: ${link.error ?? "down"}`).join("; ");
  return c.json({ status: "down", links, ...errorBody("unavailable", message) }, 503);
});

const unknownSidecars: LinkStatus = { name: "edge->sidecar", ok: false, latency_ms: 0, error: "registry unreadable: which sidecars serve is unknown" };

async function sidecarLinks(settings: Services["settings"], sidecars: { url: string; releases: string[] }[]): Promise<LinkStatus[]> {
  if (sidecars.length === 0) return [{ name: "edge->sidecar", ok: false, latency_ms: 0, error: "no serving release names a sidecar" }];
  const perSidecar = await Promise.all(
    sidecars.map(async ({ url, releases }, i) => {
      const suffix = sidecars.length > 1 ? ` #${i + 1}` : "";
      let reported: LinkStatus[] = [];
      const edge = await checkLink(`edge->sidecar${suffix}`, async () => {
        const res = await sidecarFetch(settings, url, SIDECAR_PATHS.health, { signal: AbortSignal.timeout(2800) });
        if (!res.ok) throw new Error(`sidecar answered ${res.status}`);
        reported = SidecarHealth.parse(await res.json()).links;
        return `serves ${releases.join(", ")}`;
      });
      return [edge, ...reported.map((link) => ({ ...link, name: `${link.name}${suffix}` }))];
    }),
  );
  return perSidecar.flat();
}
