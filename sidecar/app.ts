/**
 * The sidecar's HTTP surface (runs under Bun on the GPU host), its routes one file per resource under
 * sidecar/routes/. Only the edge calls it, with the shared sidecar secret; nothing here is reachable
 * with a customer credential. The protocol is server-shared/sidecar-protocol.ts.
 */
import type { Pool } from "@neondatabase/serverless";
import { Hono } from "hono";
import { METRICS_PATH, metricsHandler } from "../server-shared/metrics.ts";
import { errorRenderer, notFound, sharedSecret } from "../server-shared/http.ts";
import type { SecretReader } from "../server-shared/secrets.ts";
import type { Steps } from "./decide/steps.ts";
import { RegistryEntries } from "./decide/registry-entries.ts";
import type { Lanes } from "./lanes.ts";
import type { SidecarMetrics } from "./metrics.ts";
import { decisionRoutes } from "./routes/decisions.ts";
import { healthRoutes } from "./routes/health.ts";
import { imageRoutes } from "./routes/images.ts";
import { jobRoutes } from "./routes/jobs.ts";
import type { UsageWriter } from "./usage.ts";

export interface SidecarDeps {
  pool: Pool;
  /** Where kept keys are confirmed (`pool` when absent): connections of their own, so that a real-time answer never waits behind bulk commits. */
  confirmPool?: Pool;
  /** SIDECAR_SECRET (accepted from the edge) and the runtime secrets, by name, as they are now. */
  secrets: SecretReader;
  /** This sidecar's address as the registry's `sidecar_url` names it: it serves those releases only. */
  selfUrl: string;
  lanes: Lanes;
  /** Where successful usage goes, after the answer (sidecar/usage.ts). */
  usage: UsageWriter;
  /** The readout's steps: SERVED_STEPS unless a benchmark's baseline asks otherwise (sidecar/start.ts SidecarTuning). */
  steps?: Steps;
  /** Prometheus metrics (sidecar/metrics.ts), served at /metrics to a bearer of METRICS_SECRET. */
  metrics?: SidecarMetrics;
  /** Wakes the job workers (none when this sidecar runs no bulk worker): a job was submitted. */
  wakeJobs?: () => void;
  /** How long image preprocessing waits after writing its result (0 when absent; a test's longer window). */
  imageHoldMs?: number;
  /** Runs when an image decision's answer has been handed over (a test's crash at that point). */
  afterImageAnswer?: () => void;
}

export function createSidecarApp(deps: SidecarDeps): Hono {
  const app = new Hono();
  app.use("/internal/*", sharedSecret(() => deps.secrets.list("SIDECAR_SECRET")?.accepted ?? [], "sidecar"));
  if (deps.metrics) app.get(METRICS_PATH, metricsHandler(deps.metrics.metrics, () => deps.secrets.list("METRICS_SECRET")?.accepted));
  const registry = new RegistryEntries(deps);
  app.route("/", healthRoutes(deps));
  app.route("/", jobRoutes(deps));
  app.route("/", decisionRoutes(deps, registry));
  app.route("/", imageRoutes(deps, registry));
  app.notFound(notFound);
  app.onError(errorRenderer("sidecar", (code) => deps.metrics?.errors.inc({ code })));
  return app;
}
