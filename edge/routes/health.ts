/**
 * GET /health: proves every link of the service with a real call.
 *
 * - **Public** (load balancers, the README's first curl): only whether the service is up, 200
 *   `{"status": "ok"}` or 503 `{"status": "down", "error": ...}`, nothing about what runs where.
 * - **The operator** (`Authorization: Bearer <METRICS_SECRET>`, the operator's read-only secret that
 *   the sidecars' and runtimes' /metrics take too, and that opens nothing of any tenant): the report,
 *   each link's status and latency, which link is down and why, the releases each sidecar serves and
 *   their runtimes' identities. Where METRICS_SECRET is not set, everyone gets the public answer.
 *   SIDECAR_SECRET opens nothing here: it signs storage grants for every tenant's objects, and a
 *   monitor has no need of it.
 *
 * One probe at a time, at most one per PUBLIC_HEALTH_CACHE_MS per isolate, whoever asks and however
 * many ask at once: every request, public or the operator's, is answered from the report of the
 * latest probe while that probe runs and until PUBLIC_HEALTH_CACHE_MS after it started. The operator's
 * report is therefore up to that old too; the alternative, a fresh probe for every operator request,
 * would let the holder of a read-only secret set the links' load.
 *
 * Every sidecar that the registry names for a serving release is probed, and reports its own links
 * (sidecar->postgres, sidecar->runtime per release it serves). With several sidecars, each one's
 * links carry a ` #n` suffix, numbered in the order of the releases they serve. The probes write
 * nothing: storage is proven by a read.
 */
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../env.ts";
import { errorBody } from "../../contract/errors.ts";
import { PUBLIC_HEALTH_CACHE_MS, type HealthReport, type HealthStatus, type LinkStatus } from "../../contract/health.ts";
import { checkLink } from "../../server-shared/health.ts";
import { presentsSecret } from "../../server-shared/http.ts";
import { SIDECAR_PATHS, SidecarHealth } from "../../server-shared/sidecar-protocol.ts";
import { services, sidecarFetch, type Services } from "../services.ts";

export const health = new Hono<AppEnv>();

const PROBE_KEY = "health/probe";

/** A sidecar address with the releases the registry assigns to it. */
const SidecarRow = z.object({ sidecar_url: z.string(), releases: z.array(z.string()) }).transform((row) => ({ url: row.sidecar_url, releases: row.releases }));

/** The latest probe: when it started, whether it has ended, and its report. */
let latest: { startedAt: number; ended: boolean; report: Promise<HealthReport> } | null = null;

health.get("/health", async (c) => {
  const operator = await presentsSecret(c, services(c.env).settings.METRICS_SECRET?.accepted ?? []);
  const report = await sharedReport(c);
  if (!operator) return publicAnswer(c, report.status === "ok");
  if (report.status === "ok") return c.json(report);
  const message = report.links
    .filter((link) => !link.ok)
    .map((link) => `${link.name}: ${link.error ?? "down"}`)
    .join("; ");
  return c.json({ ...report, ...errorBody("unavailable", message) }, 503);
});

/** The latest probe's report while it runs or is younger than PUBLIC_HEALTH_CACHE_MS; else a new probe's. */
function sharedReport(c: Context<AppEnv>): Promise<HealthReport> {
  const now = Date.now();
  if (latest && (!latest.ended || now - latest.startedAt < PUBLIC_HEALTH_CACHE_MS)) return latest.report;
  const started = { startedAt: now, ended: false, report: probe(c) };
  latest = started;
  started.report.then(
    () => {
      started.ended = true;
    },
    () => {
      // A probe that threw (it reports failures as links, so only a fault of its own) is not reused.
      started.ended = true;
      if (latest === started) latest = null;
    },
  );
  // The probe's calls belong to this request: kept alive past its caller's leaving, so that the
  // requests sharing the probe still get their answer.
  c.executionCtx.waitUntil(started.report.catch(() => undefined));
  return started.report;
}

function publicAnswer(c: Context<AppEnv>, up: boolean): Response {
  if (up) return c.json({ status: "ok" } satisfies HealthStatus);
  return c.json({ status: "down", ...errorBody("unavailable", "the service is unavailable; its operator has been told which link is down") } satisfies HealthStatus, 503);
}

/** Every link, proven now. */
async function probe(c: Context<AppEnv>): Promise<HealthReport> {
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
    // A read proves the binding answers (an absent object is an answer); a probe writes nothing.
    checkLink("edge->r2", async () => {
      await c.env.BUCKET.head(PROBE_KEY);
    }),
  ]);
  const registryRead = edgeLinks[0]!.ok;
  const links = [...edgeLinks, ...(registryRead ? await sidecarLinks(settings, sidecars) : [unknownSidecars])];
  return { status: links.every((link) => link.ok) ? "ok" : "down", links };
}

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
