/**
 * The health report: one entry per link between tiers, each proven by a real call.
 *
 *     GET /health -> 200 { status: "ok", links: [{ name: "edge->postgres", ok: true, latency_ms: 3 }, ...] }
 *                 -> 503 { status: "down", error: {...}, links: [..., { name, ok: false, error: "why" }] }
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

export const SidecarHealth = z.object({ links: z.array(LinkStatus) });

export const HealthReport = z.object({
  status: z.enum(["ok", "down"]),
  links: z.array(LinkStatus),
});
export type HealthReport = z.infer<typeof HealthReport>;

/** Budget for any single link check; a slower link is reported as down. */
export const LINK_TIMEOUT_MS = 3000;

/** Runs one link check with a deadline, turning any failure into a reported status. */
export async function checkLink(
  name: string,
  probe: () => Promise<string | void>,
  timeoutMs = LINK_TIMEOUT_MS,
): Promise<LinkStatus> {
  const started = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const detail = await Promise.race([
      probe(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    const status: LinkStatus = { name, ok: true, latency_ms: elapsed(started) };
    if (detail) status.detail = detail;
    return status;
  } catch (err) {
    return { name, ok: false, latency_ms: elapsed(started), error: describe(err) };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message.slice(0, 300);
  return String(err).slice(0, 300);
}
