/**
 * The health answers. Anyone gets whether the service is up; the operator (METRICS_SECRET as a bearer
 * token) gets the report, one entry per link between tiers, each proven by a real call.
 *
 *     GET /health -> 200 { status: "ok" }  |  503 { status: "down", error: {...} }
 *     GET /health (operator) -> 200 { status: "ok", links: [{ name: "edge->postgres", ok: true, latency_ms: 3 }, ...] }
 *                            -> 503 { status: "down", error: {...}, links: [..., { name, ok: false, error: "why" }] }
 */
import { z } from "zod";

export const LinkStatus = z.object({
  name: z.string(),
  ok: z.boolean(),
  latency_ms: z.number().nonnegative(),
  /** What the link reported, e.g. the runtime's release id. Never a secret. */
  detail: z.string().optional(),
  error: z.string().optional(),
});
export type LinkStatus = z.infer<typeof LinkStatus>;

/** How long a report is reused (per edge isolate, from its probe's start), for anyone and the operator: the links get one round of calls in that time. */
export const PUBLIC_HEALTH_CACHE_MS = 3000;

/** What anyone is told. */
export const HealthStatus = z.object({ status: z.enum(["ok", "down"]) });
export type HealthStatus = z.infer<typeof HealthStatus>;

/** What the operator is told. */
export const HealthReport = z.object({
  status: z.enum(["ok", "down"]),
  links: z.array(LinkStatus),
});
export type HealthReport = z.infer<typeof HealthReport>;
