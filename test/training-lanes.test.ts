/**
 * Training passes go through the lanes. A second sidecar runs in this process: the real sidecar app
 * (sidecar/app.ts) behind a plain HTTP server and the real job worker running TrainingSteps, sharing one Lanes, on the
 * shared stack's Postgres, edge and runtime, serving a base release of its own (so the stack's
 * sidecar never takes its training, and the edge's health check finds a real sidecar behind it).
 * Real-time decisions sent through the edge while it trains each start as soon as the execution
 * running when they arrived ends: no training execution starts ahead of them, exactly as no bulk
 * execution does.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import type { SecretReader } from "../server-shared/secrets.ts";
import { createSidecarApp } from "../sidecar/app.ts";
import { Lanes, type LaneName } from "../sidecar/lanes.ts";
import { JOB_TIMING, JobWorker } from "../sidecar/jobs/worker.ts";
import { TrainingSteps } from "../sidecar/train/steps.ts";
import { UsageWriter } from "../sidecar/usage.ts";
import { call, newAccount, query, stack } from "./support/api.ts";
import { operatorHealthAfterChange } from "./support/health.ts";
import { animalSentences, noulFile, pollTraining, submitTraining, withModel, type Account } from "./support/training.ts";

/** Lanes that record, in order, when each execution is submitted and when it starts. */
class RecordingLanes extends Lanes {
  readonly events: { lane: LaneName; event: "arrive" | "start"; id: number }[] = [];
  private next = 0;
  override run<T>(lane: LaneName, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const id = this.next++;
    this.events.push({ lane, event: "arrive", id });
    return super.run(lane, () => {
      this.events.push({ lane, event: "start", id });
      return work();
    }, signal);
  }

  starts(lane: LaneName): number {
    return this.events.filter((e) => e.lane === lane && e.event === "start").length;
  }

  /** For each real-time execution: the bulk executions that started after it arrived and before it started. */
  bulkAheadOfRealtime(): number[] {
    return this.events.flatMap((e, i) => {
      if (e.lane !== "realtime" || e.event !== "arrive") return [];
      const start = this.events.findIndex((s, j) => j > i && s.id === e.id && s.event === "start");
      return [this.events.slice(i + 1, start).filter((s) => s.lane === "bulk" && s.event === "start").length];
    });
  }
}

const BASE = `training-lanes-base-${process.pid}`;
const QUESTION = { type: "noul", instructions: "Does this sentence belong to group A?" };

let pool: Pool;
let server: Server;
let selfUrl: string;
let account: Account;
let worker: JobWorker;
/** When this file's release was registered: the health report read below was probed after it. */
let registeredAt = 0;
let usage: UsageWriter;
const lanes = new RecordingLanes();

/** Serves a fetch handler on a loopback port, as Bun.serve does for the sidecar in production. */
async function serve(fetch: (request: Request) => Promise<Response>): Promise<Server> {
  const http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const headers = Object.entries(req.headers).flatMap(([name, value]) => (typeof value === "string" ? [[name, value] as [string, string]] : []));
      fetch(new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: body.length > 0 ? body : undefined }))
        .then(async (response) => {
          res.writeHead(response.status, Object.fromEntries(response.headers));
          res.end(Buffer.from(await response.arrayBuffer()));
        })
        .catch(() => res.writeHead(500).end());
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return http;
}

beforeAll(async () => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: stack().databaseUrl, max: 4 });
  account = await newAccount();
  const { secrets: stackSecrets } = stack();
  // The stack's sidecar secret, and its runtime secret under whatever variable a release names.
  const secrets: SecretReader = {
    list: (name) => (name === "SIDECAR_SECRET" ? { send: stackSecrets.sidecar, accepted: [stackSecrets.sidecar] } : { send: stackSecrets.runtime, accepted: [stackSecrets.runtime] }),
  };
  usage = new UsageWriter(pool);
  let app: ReturnType<typeof createSidecarApp> | null = null;
  server = await serve((request) => app!.fetch(request) as Promise<Response>);
  selfUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  app = createSidecarApp({ pool, secrets, selfUrl, lanes, usage });
  // A base release of this account only, on the stack's runtime (whose identity it names as its
  // base's), served by this sidecar.
  await query(
    `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, sidecar_url, release_date, base_release)
     SELECT $1, fingerprint, ARRAY[$2::uuid], url, token_env, $3, current_date, id FROM model_releases WHERE id = $4`,
    [BASE, account.accountId, selfUrl, stack().releaseId],
  );
  registeredAt = Date.now();
  const training = new TrainingSteps({ pool, lanes, selfUrl, secrets, edge: { url: stack().baseUrl, secret: () => stackSecrets.sidecar } });
  worker = new JobWorker(training, { timing: { ...JOB_TIMING, idleMs: 100 } });
});

afterAll(async () => {
  await worker?.stop();
  // Retired before this sidecar goes, so that no health check looks for it afterwards.
  // Every release it serves: the base and the model trained on it.
  await query("UPDATE model_releases SET retired_at = now() WHERE sidecar_url = $1 AND retired_at IS NULL", [selfUrl]);
  await new Promise((resolve) => server?.close(resolve));
  await usage?.flush();
  await pool?.end();
});

describe("training in the lanes", () => {
  it("never starts a training execution ahead of a waiting real-time decision", { timeout: 180_000 }, async () => {
    const training = await submitTraining(account, withModel(await noulFile(QUESTION, animalSentences()), BASE), BASE);
    worker.start();
    const reading = await pollTraining(account, training.id, (t) => (t.progress?.examples_read ?? 0) >= 2 || t.finished_at !== null, 60_000);
    expect(reading.status, JSON.stringify(reading)).toBe("running");
    // The edge's health check finds this sidecar and its releases well.
    const health = await operatorHealthAfterChange(registeredAt);
    expect(health.status, JSON.stringify(health.body)).toBe(200);

    for (let i = 0; i < 6; i++) {
      const decision = await call("/v1/systemone", {
        token: account.key.secret,
        body: { model: BASE, state: "A goat on the hill.", questions: { q: { type: "noul", instructions: "Is it about an animal?" } } },
      });
      expect(decision.status, JSON.stringify(decision.body)).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(lanes.bulkAheadOfRealtime()).toEqual([0, 0, 0, 0, 0, 0]);
    // Training did run in the bulk lane meanwhile.
    expect(lanes.starts("bulk")).toBeGreaterThan(2);
    expect(lanes.starts("realtime")).toBe(6);

    const done = await pollTraining(account, training.id);
    expect(done.status).toBe("ready");
  });
});
