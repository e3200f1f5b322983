/**
 * The sidecar's settings, parsed once at start (environment of `bun sidecar/main.ts`):
 *
 *   SIDECAR_SECRET      shared with the edge: every call must carry it, and the worker sends it to the
 *                       edge. Or SIDECAR_SECRET_FILE, a file holding it, read again on SIGHUP; `new,old`
 *                       while rotating (server-shared/secrets.ts)
 *   METRICS_SECRET      the operator's scrape secret: GET /metrics (sidecar/metrics.ts) answers its bearer.
 *                       Or METRICS_SECRET_FILE; read again on SIGHUP. Unset: no /metrics
 *   SIDECAR_URL         the address the edge reaches this sidecar at, exactly as the registry's
 *                       `sidecar_url` names it for the releases this sidecar serves
 *   SIDECAR_PORT        where to listen (0 picks a free port); SIDECAR_HOST defaults to 127.0.0.1
 *   DATABASE_URL        Postgres: Neon's in production, a loopback one locally (server-shared/neon-route.ts)
 *   NEON_LOCAL_BRIDGE   `127.0.0.1:<port>` of the local stack's Neon bridge: required for a loopback
 *                       DATABASE_URL, refused for a remote one
 *   EDGE_URL            the edge's base URL: the bulk worker asks it for storage grants
 *   UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN   quota admission of bulk records (as the edge's)
 *   JOB_WORKERS         "on" (default) or "off": whether this sidecar runs the job workers (batches and
 *                       trainings), the sweeper and the webhook sender: the GPU host's background work
 *   WEBHOOK_SECRET_KEY  the edge's list of keys that seal webhook signing secrets (server-shared/webhook-secrets.ts),
 *                       required where the webhook sender runs (JOB_WORKERS on): the sender opens each
 *                       secret with it, and re-seals under its first key what an older one holds. Or
 *                       WEBHOOK_SECRET_KEY_FILE; read again on SIGHUP; `new,old` while rotating
 *   WEBHOOK_PRIVATE_TARGETS "on": webhooks may go to loopback and private addresses (the local stack's
 *                       receivers); default "off": public addresses only, checked after resolving
 *                       (contract/webhooks.ts). Never on in production
 *   SIDECAR_DRAIN_MS    on SIGTERM, how long the lane and the bulk step in flight may take to finish
 *                       (default 25 000; keep it under the service manager's stop timeout)
 *
 * Tests and benchmarks start the sidecar from test/support/sidecar-main.ts, with settings of their own.
 *
 * Runtime secrets are read from the variables the registry's `token_env` names (or `<token_env>_FILE`),
 * when a runtime is called.
 */
import { z } from "zod";
import { checkNeonRoute } from "../server-shared/neon-route.ts";
import { flag, integer, optional, required, serviceUrl } from "../server-shared/settings.ts";

export const SidecarSettings = z.object({
  // Checked (with SIDECAR_SECRET_FILE) by server-shared/secrets.ts at start.
  SIDECAR_SECRET: optional(),
  SIDECAR_URL: serviceUrl(),
  SIDECAR_PORT: integer(0, 65535),
  SIDECAR_HOST: optional().transform((host) => host ?? "127.0.0.1"),
  DATABASE_URL: required(),
  NEON_LOCAL_BRIDGE: optional(),
  EDGE_URL: serviceUrl(),
  UPSTASH_REDIS_REST_URL: serviceUrl(),
  UPSTASH_REDIS_REST_TOKEN: required(),
  SIDECAR_DRAIN_MS: integer(0, 10 * 60_000, 25_000),
  JOB_WORKERS: flag("on"),
  // The name JOB_WORKERS had before: refused, so that a host's old `BULK_WORKER=off` never turns the workers on unnoticed.
  BULK_WORKER: z.undefined({ error: "was renamed JOB_WORKERS" }).optional(),
  // Checked (with WEBHOOK_SECRET_KEY_FILE) at start where the webhook sender runs.
  WEBHOOK_SECRET_KEY: optional(),
  WEBHOOK_PRIVATE_TARGETS: flag("off"),
}).superRefine(checkNeonRoute);
export type SidecarSettings = z.infer<typeof SidecarSettings>;
