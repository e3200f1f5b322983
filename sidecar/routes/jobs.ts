/**
 * The job workers' wake (only the edge calls it, with the sidecar secret): a job was submitted, so
 * the workers look for work now instead of at their next poll. Only a hint: they also look every
 * JOB_TIMING.idleMs.
 *
 *   POST /internal/jobs/wake {} -> 204
 */
import { Hono } from "hono";
import { LIMITS } from "../../contract/limits.ts";
import { EmptyRequest } from "../../contract/routes.ts";
import { readJson } from "../../server-shared/body.ts";
import { SIDECAR_PATHS } from "../../server-shared/sidecar-protocol.ts";
import type { SidecarDeps } from "../app.ts";

export function jobRoutes(deps: SidecarDeps): Hono {
  const app = new Hono();
  app.post(SIDECAR_PATHS.wakeJobs, async (c) => {
    await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
    deps.wakeJobs?.();
    return c.body(null, 204);
  });
  return app;
}
