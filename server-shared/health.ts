/**
 * Link checks behind `GET /health` (edge and sidecar): each probe is a real call with a deadline, and
 * any failure becomes a reported status rather than an error.
 *
 *     await checkLink("edge->postgres", async () => { await sql`SELECT 1`; });
 */
import type { LinkStatus } from "../contract/health.ts";
import { ServiceError } from "./errors.ts";

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

/** Why a probe failed: a service error's operator note (what failed, never request content), else its message. */
function describe(err: unknown): string {
  if (err instanceof ServiceError) return (err.operatorNote ?? err.message).slice(0, 300);
  if (err instanceof Error) return err.message.slice(0, 300);
  return String(err).slice(0, 300);
}
