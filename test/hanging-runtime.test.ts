/**
 * A runtime that hangs, the one fault the real runtime cannot show on demand. `HangingRuntime`
 * answers identity itself, forwards tokenize to the real runtime (stamping the answer as its own),
 * and never answers a pass. Against
 * it, a real sidecar process keeps one execution running (its passes in flight), one waiting, answers 529 at once to a
 * third, and 504 to the waiting one after the full 30 s, without ever opening a second slot.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "./support/fake-server.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { LIMITS } from "../contract/limits.ts";
import { RUNTIME_PATHS, RENDERING_VERSION } from "../server-shared/runtime-protocol.ts";
import { SIDECAR_PATHS } from "../server-shared/sidecar-protocol.ts";
import type { Child } from "../local/process.ts";
import { sidecarAddress, startSidecar } from "../local/tiers.ts";
import { registerRelease, retireRelease } from "../ops/releases.ts";
import { remember, stack, withDb } from "./support/api.ts";

const FINGERPRINT = "e".repeat(64);

/** The hung execution's calls at the runtime: one group, its noul pass and the content-free one (passes.ts PassGroups). */
const GROUP_CALLS = 1;

class HangingRuntime {
  scoreCalls = 0;
  inFlight = 0;
  maxInFlight = 0;
  private server: Awaited<ReturnType<typeof listen>> | undefined;
  url = "";

  async start(realRuntime: string, realSecret: string): Promise<void> {
    this.server = await listen(async (req, res) => {
      if (req.url === RUNTIME_PATHS.identity) {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ release_id: "hanging", fingerprint: FINGERPRINT, rendering_version: RENDERING_VERSION, modalities: ["text"], max_tokens_per_pass: 4096, engine: "HangingRuntime" }));
      } else if (req.url === RUNTIME_PATHS.tokenize) {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const real = await fetch(`${realRuntime}${RUNTIME_PATHS.tokenize}`, { method: "POST", headers: { authorization: `Bearer ${realSecret}`, "content-type": "application/json" }, body: Buffer.concat(chunks) });
        res.setHeader("content-type", "application/json");
        // Stamped as this runtime, as every tokenize response is.
        res.end(JSON.stringify({ ...((await real.json()) as object), release_id: "hanging", fingerprint: FINGERPRINT }));
      } else {
        this.scoreCalls++;
        this.inFlight++;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        req.on("close", () => this.inFlight--);
        // Never answers.
      }
    });
    this.url = this.server.url;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}

const runtime = new HangingRuntime();
let sidecar: Child;
let sidecarUrl: string;
const sidecarSecret = randomBytes(32).toString("base64url");

beforeAll(async () => {
  remember(sidecarSecret);
  await runtime.start(stack().runtimeUrl, stack().secrets.runtime);
  const address = await sidecarAddress();
  sidecarUrl = address.url;
  // The registry says this sidecar serves the "hanging" release, at the hanging runtime's address.
  await withDb((db) =>
    registerRelease(db, {
      id: "hanging",
      fingerprint: FINGERPRINT,
      url: runtime.url,
      token_env: "HANGING_RUNTIME_SECRET",
      release_date: "2026-11-01",
      description: "HangingRuntime",
      owners: [crypto.randomUUID()],
      sidecar_url: sidecarUrl,
    }),
  );
  sidecar = await startSidecar({
    name: "sidecar-hanging",
    address,
    secret: sidecarSecret,
    database: { DATABASE_URL: stack().databaseUrl, NEON_LOCAL_BRIDGE: stack().neonBridge },
    runtimeSecrets: { HANGING_RUNTIME_SECRET: "any" },
    edgeUrl: stack().baseUrl,
    upstash: { url: stack().upstashUrl, token: stack().secrets.upstash },
    // Its own secret, which the edge does not know: no bulk work here.
    extraEnv: { JOB_WORKERS: "off" },
    logDir: stack().logDir,
  });
});

afterAll(async () => {
  await sidecar?.stop();
  await runtime.stop();
  await withDb((db) => retireRelease(db, "hanging"));
});

function decide(signal?: AbortSignal): Promise<Response> {
  const call = {
    release: { id: "hanging", fingerprint: FINGERPRINT, revision: 1 },
    // Two questions: their content passes go first, both in flight at once.
    request: { state: "s", questions: { q: { type: "noul", instructions: "ok?" }, r: { type: "noul", instructions: "fine?" } } },
    account_id: crypto.randomUUID(),
    key_id: "k",
    request_id: "r",
  };
  return fetch(`${sidecarUrl}${SIDECAR_PATHS.decide}`, {
    method: "POST",
    headers: { authorization: `Bearer ${sidecarSecret}`, "content-type": "application/json" },
    body: JSON.stringify(call),
    signal,
  });
}

async function until(condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("a runtime that hangs", () => {
  it(
    "holds one execution, refuses a third request at once with 529, times the waiting one out at 30 s with 504, never running two",
    async () => {
      const running = decide();
      await until(() => runtime.scoreCalls === GROUP_CALLS);

      const waitingSince = Date.now();
      const waiting = decide();
      await new Promise((r) => setTimeout(r, 200));

      const t0 = Date.now();
      const full = await decide();
      expect(Date.now() - t0).toBeLessThan(1000);
      expect(full.status).toBe(529);
      expect(ErrorEnvelope.parse(await full.json()).error.code).toBe("lane_full");

      const timedOut = await waiting;
      const waited = Date.now() - waitingSince;
      expect(timedOut.status).toBe(504);
      expect(ErrorEnvelope.parse(await timedOut.json()).error.code).toBe("timeout");
      expect(waited).toBeGreaterThanOrEqual(LIMITS.laneWaitMs - 50);
      expect(waited).toBeLessThan(LIMITS.laneWaitMs + 5000);

      // The timeout opened no second slot: the hung execution's group (its noul pass and the
      // content-free one, sent together) is still the only call the runtime saw.
      expect(runtime.scoreCalls).toBe(GROUP_CALLS);
      expect(runtime.maxInFlight).toBe(GROUP_CALLS);
      void running.catch(() => {});
    },
    LIMITS.laneWaitMs + 30_000,
  );

  it("frees the pending slot as soon as a waiting caller disconnects, so its retry is not refused", async () => {
    // The hung execution of the test above still holds the GPU.
    expect(runtime.inFlight).toBe(GROUP_CALLS);
    const abandoned = new AbortController();
    const first = decide(abandoned.signal).catch(() => "aborted");
    await new Promise((r) => setTimeout(r, 300));
    const whileWaiting = await decide();
    expect(whileWaiting.status).toBe(529);
    abandoned.abort();
    expect(await first).toBe("aborted");
    await new Promise((r) => setTimeout(r, 300));

    const retryControl = new AbortController();
    const retry = decide(retryControl.signal).then((res) => res.status, () => "aborted");
    await new Promise((r) => setTimeout(r, 1000));
    // The retry is waiting, not refused: a third request now finds the lane full again.
    expect((await decide()).status).toBe(529);
    retryControl.abort();
    expect(await retry).toBe("aborted");
    expect(runtime.scoreCalls).toBe(GROUP_CALLS);
  });
});
