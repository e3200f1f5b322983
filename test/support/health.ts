/**
 * The operator's view of the shared stack's GET /health, for tests that check it after a change. The
 * edge answers every request from one report until PUBLIC_HEALTH_CACHE_MS after its probe started
 * (edge/routes/health.ts), and an earlier test may have asked a moment before the change; so this
 * asks once that long has passed since the change, and the report it gets was probed after it.
 *
 *     const registered = Date.now(); // ...a release registered, a sidecar started
 *     const { status, body } = await operatorHealthAfterChange(registered);
 */
import { PUBLIC_HEALTH_CACHE_MS } from "../../contract/health.ts";
import { call, stack, type Reply } from "./api.ts";

/** Room for the edge's clock, which in workerd advances only at I/O. */
const MARGIN_MS = 200;

/** The full report, probed after `changedAt` (by default, now: the change was just made). */
export async function operatorHealthAfterChange(changedAt = Date.now()): Promise<Reply> {
  const wait = changedAt + PUBLIC_HEALTH_CACHE_MS + MARGIN_MS - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  return call("/health", { token: stack().secrets.metrics });
}
