/**
 * GET /health: proves every link of the service with a real call and says which one is down.
 * Unauthenticated by design (load balancers and the README's first curl use it); it reports statuses,
 * latencies and release ids, never addresses or secrets.
 */
import { Hono } from "hono";
import type { AppEnv } from "../env.ts";
import { errorBody } from "../../contract/errors.ts";
import { checkLink, SidecarHealth, type HealthReport, type LinkStatus } from "../../contract/health.ts";
import { redis, sidecarFetch, sql } from "../services.ts";

export const health = new Hono<AppEnv>();

const PROBE_KEY = "health/probe";

health.get("/health", async (c) => {
  const env = c.env;
  let sidecarLinks: LinkStatus[] = [];
  const edgeLinks = await Promise.all([
    checkLink("edge->postgres", async () => {
      const rows = await sql(env)`SELECT 1 AS one`;
      if (rows[0]?.one !== 1) throw new Error("unexpected answer to SELECT 1");
    }),
    checkLink("edge->redis", async () => {
      const answer = await redis(env).ping();
      if (answer !== "PONG") throw new Error(`unexpected PING answer ${answer}`);
    }),
    checkLink("edge->r2", async () => {
      const stamp = crypto.randomUUID();
      await env.BUCKET.put(PROBE_KEY, stamp);
      const read = await env.BUCKET.get(PROBE_KEY);
      if ((await read?.text()) !== stamp) throw new Error("object read back differs from what was written");
    }),
    checkLink("edge->sidecar", async () => {
      const res = await sidecarFetch(env, "/internal/health", { signal: AbortSignal.timeout(2800) });
      if (!res.ok) throw new Error(`sidecar answered ${res.status}`);
      sidecarLinks = SidecarHealth.parse(await res.json()).links;
    }),
  ]);
  const links = [...edgeLinks, ...sidecarLinks];
  const down = links.filter((link) => !link.ok);
  if (down.length === 0) return c.json({ status: "ok", links } satisfies HealthReport);
  const message = down.map((link) => `${link.name}: ${link.error ?? "down"}`).join("; ");
  return c.json({ status: "down", links, ...errorBody("unavailable", message) }, 503);
});
