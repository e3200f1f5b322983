/**
 * A sidecar process, one per GPU host: its pools, lanes, job workers, sweeper, webhook sender and HTTP
 * server, from the settings in its environment (sidecar/settings.ts). `runSidecar()` is the
 * production sidecar (sidecar/main.ts); tests and benchmarks start it with a `SidecarTuning` of
 * their own (test/support/sidecar-main.ts: shorter periods, a fault, a baseline), never production.
 *
 * Signals: SIGTERM (or SIGINT) drains and exits (see `shutdown`); SIGHUP reads the secret files again
 * (`systemctl reload`), so a secret is rotated without a restart, and seals every webhook secret
 * under the first key of WEBHOOK_SECRET_KEY (sidecar/webhook-sealing.ts).
 */
import { Pool } from "@neondatabase/serverless";
import { Redis } from "@upstash/redis";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { parseSettings } from "../server-shared/settings.ts";
import { createSidecarApp } from "./app.ts";
import { Lanes } from "./lanes.ts";
import { UsageWriter } from "./usage.ts";
import { BulkSteps } from "./bulk/steps.ts";
import type { ClaimSizing } from "./bulk/claim-size.ts";
import { BackgroundSlots } from "./bulk/records.ts";
import { JOB_TIMING, JobWorker, type JobTiming } from "./jobs/worker.ts";
import { TrainingSteps } from "./train/steps.ts";
import { Sweeper, SWEEPER_TIMING, type SweeperTiming } from "./sweeper.ts";
import { WebhookSender } from "./webhooks.ts";
import { SecretSealer } from "./webhook-sealing.ts";
import { webhookKeyProblem, webhookKeyring } from "../server-shared/webhook-secrets.ts";
import { sidecarMetrics } from "./metrics.ts";
import { SidecarSettings } from "./settings.ts";
import { SERVED_STEPS, type Steps } from "./decide/steps.ts";
import { loggable } from "../server-shared/errors.ts";

/** What a test or a benchmark changes in a sidecar; production changes nothing. */
export interface SidecarTuning {
  /** The job workers' lease, renewal and idle periods. */
  jobTiming?: Partial<JobTiming>;
  /** How often retention cleanup runs, and the retention periods. */
  sweeperTiming?: Partial<SweeperTiming>;
  /** How long a webhook attempt holds its delivery. */
  webhookLeaseMs?: number;
  /** How many records each bulk claim takes (production sizes claims from the time records take). */
  claimSize?: ClaimSizing;
  /** The readout's steps (a benchmark's baseline): SERVED_STEPS otherwise. */
  steps?: Steps;
  /** How long image preprocessing waits after writing its result. */
  imageHoldMs?: number;
  /** Runs when an image decision's answer has been handed over (a test's crash at that point). */
  afterImageAnswer?: () => void;
}

export function runSidecar(tuning: SidecarTuning = {}): void {
  let settings: SidecarSettings;
  const secrets = new SecretSource(process.env);
  try {
    settings = parseSettings("sidecar", SidecarSettings, process.env);
    if (!secrets.list("SIDECAR_SECRET")) throw new Error("sidecar: setting SIDECAR_SECRET (or SIDECAR_SECRET_FILE) is required");
    if (settings.JOB_WORKERS === "on") checkWebhookKeys();
  } catch (err) {
    console.error(`${(err as Error).message.replace(/^(?!sidecar: )/, "sidecar: ")}; refusing to start`);
    process.exit(2);
  }
  useNeonRoute(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE));
  const sidecarSecret = () => secrets.list("SIDECAR_SECRET")!;

  /** The webhook sender opens endpoints' secrets with these keys: required where it runs. Throws naming the setting, never a value. */
  function checkWebhookKeys(): void {
    const keys = secrets.list("WEBHOOK_SECRET_KEY");
    if (!keys) throw new Error("sidecar: setting WEBHOOK_SECRET_KEY (or WEBHOOK_SECRET_KEY_FILE) is required where the webhook sender runs (JOB_WORKERS on)");
    const problem = webhookKeyProblem(keys);
    if (problem) throw new Error(`sidecar: setting WEBHOOK_SECRET_KEY ${problem}`);
  }
  const webhookKeys = () => webhookKeyring(secrets.list("WEBHOOK_SECRET_KEY")!);

  const pool = new Pool({ connectionString: settings.DATABASE_URL, max: 4 });
  // The confirmations of kept keys (app.ts) have connections of their own, opened at start and kept
  // open when idle: a real-time answer never waits behind the bulk worker's commits for a connection,
  // nor for one to be opened (about 100 ms: a socket, TLS and authentication).
  const confirmPool = new Pool({ connectionString: settings.DATABASE_URL, max: 2, idleTimeoutMillis: 0 });
  void confirmPool.query("SELECT 1").catch(() => undefined);
  // An idle connection dropped by the server must not crash the process.
  for (const p of [pool, confirmPool]) p.on("error", (err: Error) => console.error(`sidecar: postgres pool error: ${loggable(err)}`));

  const usage = new UsageWriter(pool);
  const metrics = sidecarMetrics({ pool, lanes: () => lanes.snapshot() });
  const lanes = new Lanes({
    observer: {
      started: (lane, waitedMs) => metrics.laneWait.observe({ lane }, waitedMs / 1000),
      refused: (lane, code) => metrics.laneRefusals.inc({ lane, code }),
    },
  });
  const steps: Steps = tuning.steps ?? SERVED_STEPS;

  /**
   * The job workers: one loop per kind, so that a kind's step never waits behind another's (a
   * training's fit runs seconds on the CPU while batches keep the runtime busy). Both are background
   * work of the GPU host, in the bulk lane.
   */
  const jobTiming = { ...JOB_TIMING, ...tuning.jobTiming };
  const edge = { url: settings.EDGE_URL, secret: () => sidecarSecret().send };
  // The background's passes at the runtime, shared by both workers (bulk/records.ts BackgroundSlots).
  const background = new BackgroundSlots();
  const workers =
    settings.JOB_WORKERS === "on"
      ? [
          new JobWorker(
            new BulkSteps({
              pool,
              lanes,
              redis: new Redis({ url: settings.UPSTASH_REDIS_REST_URL, token: settings.UPSTASH_REDIS_REST_TOKEN, retry: false, enableTelemetry: false }),
              selfUrl: settings.SIDECAR_URL,
              secrets,
              edge,
              steps,
              background,
              committed: (outcome) => metrics.bulkRecords.inc({ outcome }),
              ...(tuning.claimSize ? { claimSize: tuning.claimSize } : {}),
            }),
            { timing: jobTiming },
          ),
          new JobWorker(new TrainingSteps({ pool, lanes, selfUrl: settings.SIDECAR_URL, secrets, edge, background }), { timing: jobTiming }),
        ]
      : [];

  const app = createSidecarApp({
    pool,
    confirmPool,
    secrets,
    selfUrl: settings.SIDECAR_URL,
    lanes,
    usage,
    steps,
    metrics,
    ...(tuning.imageHoldMs ? { imageHoldMs: tuning.imageHoldMs } : {}),
    ...(tuning.afterImageAnswer ? { afterImageAnswer: tuning.afterImageAnswer } : {}),
    wakeJobs: () => {
      for (const worker of workers) worker.wake();
    },
  });
  const server = Bun.serve({ hostname: settings.SIDECAR_HOST, port: settings.SIDECAR_PORT, fetch: app.fetch });
  console.log(`SIDECAR READY ${JSON.stringify({ port: server.port })}`);

  for (const worker of workers) worker.start();

  // Expiry, completion after a crash, the credit sweep and retention cleanup, for both kinds of job.
  const sweeper =
    settings.JOB_WORKERS === "on"
      ? new Sweeper({
          pool,
          edge,
          timing: { ...SWEEPER_TIMING, ...tuning.sweeperTiming },
        })
      : null;
  sweeper?.start();

  // Webhook deliveries from the outbox the job transitions write.
  const webhookSender =
    settings.JOB_WORKERS === "on"
      ? new WebhookSender({
          pool,
          privateTargets: settings.WEBHOOK_PRIVATE_TARGETS === "on",
          keyring: webhookKeys,
          ...(tuning.webhookLeaseMs ? { leaseMs: tuning.webhookLeaseMs } : {}),
          attempted: (delivered) => metrics.webhookAttempts.inc({ outcome: delivered ? "delivered" : "failed" }),
        })
      : null;
  webhookSender?.start();
  // Endpoints' secrets still plain, or under an older key, sealed under the current key (at start, hourly, on SIGHUP).
  const secretSealer = webhookSender ? new SecretSealer({ pool, keyring: webhookKeys }) : null;
  secretSealer?.start();

  process.on("SIGHUP", () => {
    const failed = secrets.reload();
    console.error(failed.length === 0 ? "sidecar: secrets read again" : `sidecar: could not read ${failed.join(", ")} again; kept the previous value`);
    if (!secretSealer) return;
    try {
      checkWebhookKeys();
      secretSealer.wake();
    } catch (err) {
      console.error(`${(err as Error).message}; webhook deliveries wait until it is mended`);
    }
  });

  /**
   * A graceful shutdown, within SIDECAR_DRAIN_MS: stop listening and claiming; let the real-time
   * requests already taken answer (those waiting in the lane included) and the bulk step in flight
   * commit, renewing no lease meanwhile (a step still running at the deadline is abandoned and its
   * lease released); write every usage row; close the pool.
   */
  let stopping = false;
  async function shutdown(): Promise<void> {
    if (stopping) return;
    stopping = true;
    console.error(`sidecar: stopping; draining for at most ${settings.SIDECAR_DRAIN_MS} ms`);
    const deadline = AbortSignal.timeout(settings.SIDECAR_DRAIN_MS);
    const drained = Promise.all([...workers.map((worker) => worker.stop({ drain: deadline })), sweeper?.stop(), webhookSender?.stop(), secretSealer?.stop(), server.stop()]);
    await Promise.race([drained, new Promise((resolve) => deadline.addEventListener("abort", resolve, { once: true }))]);
    if (deadline.aborted) {
      console.error("sidecar: drain deadline reached; closing the requests still open");
      await server.stop(true);
      await Promise.all(workers.map((worker) => worker.stop({ drain: deadline })));
    }
    await usage.flush();
    await pool.end().catch(() => {});
    await confirmPool.end().catch(() => {});
    process.exit(0);
  }
  process.on("SIGTERM", shutdown);
  process.on("SIGINT", shutdown);
}
