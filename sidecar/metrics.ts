/**
 * The sidecar's Prometheus metrics (server-shared/metrics.ts), served at GET /metrics to a bearer of
 * METRICS_SECRET. The runtime serves its own (passes, tokens, pass latency, busy time: runtime/server.ts).
 * docs/deploy.md lists them with a scrape configuration.
 *
 *   svc_lane_waiting{lane}                   gauge: executions waiting for the GPU
 *   svc_lane_running{lane}                   gauge: 1 while an execution of the lane holds the GPU
 *   svc_lane_wait_seconds{lane}              histogram: how long executions waited before starting
 *   svc_lane_refusals_total{lane,code}       counter: refused executions, lane_full (529) or timeout (504)
 *   svc_bulk_records_total{outcome}          counter: batch records committed, answered or error (rate()*60: per minute)
 *   svc_image_decisions_total{outcome}       counter: image decisions, answered or error
 *   svc_errors_total{code}                   counter: errors this sidecar answered the edge, by stable code
 *   svc_webhook_attempts_total{outcome}      counter: webhook delivery attempts, delivered or failed
 *   svc_health_reports_total                 counter: health reports given (one per edge probe, one per GPU host check)
 *   svc_training_jobs{status}                gauge: training jobs by status, purged ones left out (Postgres, at scrape)
 *   svc_image_credit_reserved_micro_usd      gauge: image credit held by reservations not yet settled (Postgres, at scrape)
 */
import type { Pool } from "@neondatabase/serverless";
import { z } from "zod";
import { TRAINING_STATUSES } from "../contract/trainings.ts";
import { Column } from "../server-shared/db.ts";
import { Metrics } from "../server-shared/metrics.ts";
import type { LaneName, LaneSnapshot } from "./lanes.ts";

const LANES: readonly LaneName[] = ["realtime", "bulk"];

export type SidecarMetrics = ReturnType<typeof sidecarMetrics>;

export function sidecarMetrics(deps: { pool: Pool; lanes: () => LaneSnapshot }) {
  const metrics = new Metrics();
  metrics.gauge("svc_lane_waiting", "Executions waiting for the GPU, by lane.", () => LANES.map((lane) => ({ labels: { lane }, value: deps.lanes().waiting[lane] })));
  metrics.gauge("svc_lane_running", "1 while an execution of the lane holds the GPU, else 0.", () => LANES.map((lane) => ({ labels: { lane }, value: deps.lanes().running === lane ? 1 : 0 })));
  const laneWait = metrics.histogram("svc_lane_wait_seconds", "How long executions waited for the GPU before they started, by lane.", ["lane"]);
  const laneRefusals = metrics.counter("svc_lane_refusals_total", "Executions a lane refused: lane_full (answered 529) or timeout (504).", ["lane", "code"]);
  const bulkRecords = metrics.counter("svc_bulk_records_total", "Batch records committed by this sidecar, by outcome (answered, error).", ["outcome"]);
  const imageDecisions = metrics.counter("svc_image_decisions_total", "Image decisions run by this sidecar, by outcome (answered, error).", ["outcome"]);
  const errors = metrics.counter("svc_errors_total", "Errors this sidecar answered, by stable error code.", ["code"]);
  const webhookAttempts = metrics.counter("svc_webhook_attempts_total", "Webhook delivery attempts, by outcome (delivered, failed).", ["outcome"]);
  const healthReports = metrics.counter("svc_health_reports_total", "Health reports this sidecar gave: one per probe of the edge's /health, one per check of the GPU host's.");
  // Shown as 0 before the first report, so that the series exists from the first scrape.
  healthReports.inc({}, 0);
  metrics.gauge("svc_training_jobs", "Training jobs by status, purged ones left out.", async () => {
    const { rows } = await deps.pool.query("SELECT status, count(*) AS n FROM trainings WHERE purged_at IS NULL GROUP BY status");
    const counts = new Map(rows.map((row) => [z.string().parse(row.status), Column.int.parse(row.n)]));
    return TRAINING_STATUSES.map((status) => ({ labels: { status }, value: counts.get(status) ?? 0 }));
  });
  metrics.gauge("svc_image_credit_reserved_micro_usd", "Image credit held by reservations not yet settled or released, in micro-dollars.", async () => {
    const { rows } = await deps.pool.query("SELECT coalesce(sum(amount_micro_usd), 0) AS held FROM credit_reservations WHERE status = 'reserved'");
    return [{ labels: {}, value: Column.int.parse(rows[0]?.held ?? 0) }];
  });
  return { metrics, laneWait, laneRefusals, bulkRecords, imageDecisions, errors, webhookAttempts, healthReports };
}
