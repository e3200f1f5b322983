/**
 * Prometheus metrics on the shared stack: the sidecar's and the runtime's /metrics answer only the
 * operator's scrape secret (not the sidecar's or the runtime's own), in the text format; and the
 * counters move with the traffic this file sends: real-time decisions (passes, tokens, pass
 * latency, lane waits), a batch (records), errors answered by each tier, a training created.
 * Test files run one at a time, so the traffic here is the stack's traffic, but for background work
 * (sweeps, earlier files' webhook retries): hence "at least" where other work could add.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Training } from "../contract/trainings.ts";
import { METRICS_CONTENT_TYPE } from "../server-shared/metrics.ts";
import { RUNTIME_PATHS } from "../server-shared/runtime-protocol.ts";
import { SIDECAR_PATHS } from "../server-shared/sidecar-protocol.ts";
import { call, newAccount, stack } from "./support/api.ts";
import { lines, poll, submitted } from "./support/bulk.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;
let account: Account;

beforeAll(async () => {
  account = await newAccount();
});

/** One scrape, parsed: each series (name and labels, as written) to its value. */
async function scrape(base: string): Promise<Map<string, number>> {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${stack().secrets.metrics}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe(METRICS_CONTENT_TYPE);
  const series = new Map<string, number>();
  for (const line of (await res.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

const sidecar = () => scrape(stack().sidecarUrl);
const runtime = () => scrape(stack().runtimeUrl);
const moved = (before: Map<string, number>, after: Map<string, number>, name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);

describe("GET /metrics", () => {
  it("answers the operator's scrape secret only, on the sidecar and the runtime", async () => {
    const { sidecarUrl, runtimeUrl, secrets } = stack();
    for (const base of [sidecarUrl, runtimeUrl]) {
      for (const token of [undefined, "wrong", secrets.sidecar, secrets.runtime]) {
        const res = await fetch(`${base}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
        expect(res.status, `${base} with ${token === undefined ? "no token" : "another secret"}`).toBe(401);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_credentials");
      }
    }
    // The scrape secret opens nothing else.
    const stats = await fetch(`${runtimeUrl}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${secrets.metrics}` } });
    expect(stats.status).toBe(401);
  });

  it("names every family with HELP and TYPE, in Prometheus' conventions", async () => {
    for (const base of [stack().sidecarUrl, stack().runtimeUrl]) {
      const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${stack().secrets.metrics}` } })).text();
      const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name: name!, type: type! }));
      expect(types.length).toBeGreaterThan(3);
      for (const { name, type } of types) {
        expect(name).toMatch(/^svc_[a-z_]+$/);
        expect(text).toContain(`# HELP ${name} `);
        if (type === "counter") expect(name).toMatch(/_total$/);
        if (name.includes("seconds")) expect(name).toMatch(/_seconds(_total)?$/);
      }
    }
  });
});

describe("the counters", () => {
  it("move with real-time decisions: passes, tokens, pass latency, lane starts", { timeout: 120_000 }, async () => {
    const [sidecarBefore, runtimeBefore] = [await sidecar(), await runtime()];
    const decisions = 4;
    let passes = 0;
    for (let i = 0; i < decisions; i++) {
      const reply = await call("/v1/systemone", { token: account.key.secret, body: { state: `Metrics check ${i}: the parcel arrived ${i} days late and torn.`, questions: { q: { type: "noul", instructions: "Is the customer unhappy?" } } } });
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      passes += 1;
    }
    const [sidecarAfter, runtimeAfter] = [await sidecar(), await runtime()];
    expect(moved(runtimeBefore, runtimeAfter, "svc_runtime_passes_total")).toBeGreaterThanOrEqual(passes);
    expect(moved(runtimeBefore, runtimeAfter, "svc_runtime_evaluated_tokens_total")).toBeGreaterThan(decisions * 10);
    expect(moved(runtimeBefore, runtimeAfter, "svc_runtime_busy_seconds_total")).toBeGreaterThan(0);
    // Each decision's passes in one group call.
    expect(moved(runtimeBefore, runtimeAfter, 'svc_runtime_pass_duration_seconds_count{call="score_group"}')).toBeGreaterThanOrEqual(decisions);
    // Every call took more than nothing and less than the last bucket.
    expect(runtimeAfter.get('svc_runtime_pass_duration_seconds_bucket{call="score_group",le="+Inf"}')).toBe(runtimeAfter.get('svc_runtime_pass_duration_seconds_count{call="score_group"}'));
    expect(moved(sidecarBefore, sidecarAfter, 'svc_lane_wait_seconds_count{lane="realtime"}')).toBeGreaterThanOrEqual(decisions);
    expect(sidecarAfter.get('svc_lane_waiting{lane="realtime"}')).toBe(0);
    expect(sidecarAfter.has('svc_lane_running{lane="bulk"}')).toBe(true);
  });

  it("count a batch's records as they are committed", { timeout: 120_000 }, async () => {
    const before = await sidecar();
    const id = await submitted(account, lines([1, 2, 3].map((i) => ({ custom_id: `m${i}`, body: { state: `crate ${i} is dented`, questions: { q: { type: "noul", instructions: "Is it damaged?" } } } }))));
    expect((await poll(account, id)).request_counts).toMatchObject({ completed: 3 });
    const after = await sidecar();
    expect(moved(before, after, 'svc_bulk_records_total{outcome="answered"}')).toBe(3);
    expect(moved(before, after, 'svc_lane_wait_seconds_count{lane="bulk"}')).toBeGreaterThanOrEqual(1);
  });

  it("count the errors each tier answers, by code", async () => {
    const { sidecarUrl, runtimeUrl, secrets } = stack();
    const [sidecarBefore, runtimeBefore] = [await sidecar(), await runtime()];
    const bad = await fetch(`${sidecarUrl}${SIDECAR_PATHS.decide}`, { method: "POST", headers: { authorization: `Bearer ${secrets.sidecar}`, "content-type": "application/json" }, body: "{}" });
    expect(bad.status).toBe(422);
    const duplicate = await fetch(`${runtimeUrl}${RUNTIME_PATHS.score}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secrets.runtime}`, "content-type": "application/json" },
      body: JSON.stringify({ segments: [{ text: "Is it?", special: false }], label_tokens: [7, 7] }),
    });
    expect(duplicate.status).toBe(422);
    expect(moved(sidecarBefore, await sidecar(), 'svc_errors_total{code="invalid_request"}')).toBe(1);
    expect(moved(runtimeBefore, await runtime(), 'svc_runtime_errors_total{code="invalid_request"}')).toBe(1);
  });

  it("show training jobs by status", async () => {
    const before = await sidecar();
    const created = await call<Training>("/v1/trainings", { token: account.userToken, body: { idempotency_key: `metrics-${Date.now()}`, input_bytes: 100 } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const after = await sidecar();
    expect(moved(before, after, 'svc_training_jobs{status="uploading"}')).toBe(1);
    await call(`/v1/trainings/${created.body.id}/cancel`, { token: account.userToken, body: {} });
    expect(moved(after, await sidecar(), 'svc_training_jobs{status="uploading"}')).toBe(-1);
    expect((await sidecar()).has("svc_image_credit_reserved_micro_usd")).toBe(true);
  });
});
