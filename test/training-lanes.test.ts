/**
 * Training passes go through the lanes: a training worker in this process (the real TrainingWorker
 * on the shared stack's Postgres, edge and runtime, with its own sidecar address and its own base
 * release, so the stack's sidecar never takes its job) shares one Lanes with real-time executions
 * sent while it trains. Every real-time execution starts as soon as the execution running when it
 * arrived ends: no training execution starts ahead of it, exactly as no bulk execution does.
 */
import { neon, Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import type { SecretReader } from "../server-shared/secrets.ts";
import { executeDecision } from "../sidecar/decide/execute.ts";
import { verifiedRelease } from "../sidecar/decide/identity.ts";
import { Lanes, type LaneName } from "../sidecar/lanes.ts";
import { runtimeClientFor } from "../sidecar/runtime/client.ts";
import { registeredRelease } from "../sidecar/runtime/registry.ts";
import { TrainingWorker, TRAINING_TIMING } from "../sidecar/train/worker.ts";
import { newAccount, query, stack } from "./support/api.ts";
import { animalSentences, noulFile, pollTraining, submitTraining, withModel, type Account } from "./support/training.ts";

/** Lanes that record the order in which executions start. */
class RecordingLanes extends Lanes {
  readonly starts: LaneName[] = [];
  override run<T>(lane: LaneName, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return super.run(lane, () => {
      this.starts.push(lane);
      return work();
    }, signal);
  }
}

const SELF = `http://127.0.0.1:9/training-lanes-${process.pid}`;
const BASE = `training-lanes-base-${process.pid}`;
const QUESTION = { type: "noul", instructions: "Does this sentence belong to group A?" };

let pool: Pool;
let account: Account;
const lanes = new RecordingLanes();
let worker: TrainingWorker;

beforeAll(async () => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  void neon;
  pool = new Pool({ connectionString: stack().databaseUrl, max: 4 });
  account = await newAccount();
  // A base release of this account only, on the stack's runtime (whose identity it names as its
  // base's), served at this test's address.
  await query(
    `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, sidecar_url, release_date, base_release)
     SELECT $1, fingerprint, ARRAY[$2::uuid], url, token_env, $3, current_date, id FROM model_releases WHERE id = $4`,
    [BASE, account.accountId, SELF, stack().releaseId],
  );
  // The stack's runtime secret, whatever variable the release names.
  const secrets: SecretReader = { list: () => ({ send: stack().secrets.runtime, accepted: [stack().secrets.runtime] }) };
  worker = new TrainingWorker({ pool, lanes, selfUrl: SELF, secrets, edge: { url: stack().baseUrl, secret: () => stack().secrets.sidecar }, timing: { ...TRAINING_TIMING, idleMs: 100 } });
});

afterAll(async () => {
  await worker?.stop();
  // Retired, so that the stack's health report does not list a release no sidecar answers for.
  await query("UPDATE model_releases SET retired_at = now(), sidecar_url = NULL WHERE id = $1 OR base_release = $1", [BASE]);
  await pool?.end();
});

describe("training in the lanes", () => {
  it("never starts a training execution ahead of a waiting real-time one", { timeout: 180_000 }, async () => {
    const training = await submitTraining(account, withModel(await noulFile(QUESTION, animalSentences()), BASE), BASE);
    worker.start();
    const reading = await pollTraining(account, training.id, (t) => (t.progress?.examples_read ?? 0) >= 2 || t.finished_at !== null, 60_000);
    expect(reading.status, JSON.stringify(reading)).toBe("running");

    const entry = (await registeredRelease(pool, BASE))!;
    const release = await verifiedRelease(entry, { id: entry.id, fingerprint: entry.fingerprint });
    const client = runtimeClientFor(entry, { list: () => ({ send: stack().secrets.runtime, accepted: [stack().secrets.runtime] }) });
    const aheadOfRealtime: number[] = [];
    for (let i = 0; i < 6; i++) {
      const arrived = lanes.starts.length;
      let startedAt = -1;
      await lanes.run("realtime", async () => {
        startedAt = lanes.starts.length - 1;
        return executeDecision(client, release, { state: "A goat on the hill.", questions: new Map([["q", { type: "noul", instructions: "Is it about an animal?" }]]) });
      });
      // Executions that started between this one's arrival and its own start: none may be training.
      aheadOfRealtime.push(lanes.starts.slice(arrived, startedAt).filter((lane) => lane === "bulk").length);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(aheadOfRealtime).toEqual([0, 0, 0, 0, 0, 0]);
    // Training did run in the bulk lane meanwhile, between the real-time executions.
    expect(lanes.starts.filter((lane) => lane === "bulk").length).toBeGreaterThan(2);
    expect(lanes.starts.filter((lane) => lane === "realtime")).toHaveLength(6);

    const done = await pollTraining(account, training.id);
    expect(done.status).toBe("ready");
  });
});
