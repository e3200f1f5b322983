/**
 * The sidecar's HTTP surface (runs under Bun on the GPU host). Only the edge calls it, with the shared
 * sidecar secret; nothing here is reachable with a customer credential. The protocol is
 * server-shared/sidecar-protocol.ts.
 */
import type { SecretReader } from "../server-shared/secrets.ts";
import { Hono, type Context } from "hono";
import { METRICS_PATH, metricsHandler } from "../server-shared/metrics.ts";
import type { SidecarMetrics } from "./metrics.ts";
import type { Pool } from "@neondatabase/serverless";
import type { LinkStatus } from "../contract/health.ts";
import { readJson } from "../server-shared/body.ts";
import { EmptyRequest } from "../contract/routes.ts";
import { LIMITS } from "../contract/limits.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { checkLink } from "../server-shared/health.ts";
import { errorRenderer, notFound, orderedJson, sharedSecret } from "../server-shared/http.ts";
import type { RegistryEntry } from "../server-shared/registry.ts";
import {
  PreprocessImageRequest,
  SIDECAR_BODY,
  SIDECAR_PATHS,
  SidecarDecideRequest,
  SidecarImageDecideRequest,
  SIDECAR_STALE_STATUS,
  type ResolvedRelease,
  type SidecarDecideResponse,
  type SidecarStale,
} from "../server-shared/sidecar-protocol.ts";
import { keyStands } from "../server-shared/key-check.ts";
import { poolDb } from "../server-shared/db.ts";
import { finalizeImage } from "./images/finalize.ts";
import { checkImageTask, imageAnswer, imageUsage, readImageFeatures } from "./images/decide.ts";
import { applyHead } from "./train/head.ts";
import { savedQuestions } from "../server-shared/trained.ts";
import { admitDecision, runDecision, type Execution } from "./decide/execute.ts";
import type { Steps } from "./decide/steps.ts";
import { runtimeOf, verifiedClient, verifiedRelease, type Release } from "./decide/identity.ts";
import type { Lanes } from "./lanes.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import { ownedBy, runtimeClientFor, timedClient } from "./runtime/client.ts";
import { servedRelease, servedReleases } from "./runtime/registry.ts";
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
  /** The readout's steps: SERVED_STEPS unless a benchmark's baseline asks otherwise (SIDECAR_SHARED_WORK). */
  steps?: Steps;
  /** Prometheus metrics (sidecar/metrics.ts), served at /metrics to a bearer of METRICS_SECRET. */
  metrics?: SidecarMetrics;
  /** Wakes the job workers (none when this sidecar runs no bulk worker): a job was submitted. */
  wakeJobs?: () => void;
  /** Tests only (SVC_TEST_IMAGE_HOLD_MS): how long image preprocessing waits after writing its result. */
  imageHoldMs?: number;
  /** Tests only (SVC_TEST_CRASH_AFTER_IMAGE_ANSWER): the process kills itself right after an image decision's answer is handed over. */
  exitAfterImageAnswer?: boolean;
}

/**
 * The registry entry of a release the edge resolved, read and checked by this sidecar (identity.ts
 * `verifiedRelease`), with the release built from it. Entries are kept by release id with the row
 * revision they were read at; the edge names the revision it read in the same request, so a changed
 * row (address, assignment, retirement) is read again on the next request, and an unchanged one
 * costs no Postgres round trip.
 */
class RegistryEntries {
  private readonly entries = new Map<string, { entry: RegistryEntry; release: Release }>();
  constructor(private readonly deps: SidecarDeps) {}

  async get(resolved: ResolvedRelease): Promise<{ entry: RegistryEntry; release: Release }> {
    const kept = this.entries.get(resolved.id);
    if (kept && kept.entry.revision === resolved.revision && kept.release.fingerprint === resolved.fingerprint) return kept;
    this.entries.delete(resolved.id);
    const entry = await servedRelease(this.deps.pool, this.deps.selfUrl, resolved.id);
    if (!entry) {
      throw new ServiceError(
        "unavailable",
        "the model service cannot serve this model right now; retry shortly",
        `release ${resolved.id} is not served by this sidecar (${this.deps.selfUrl}): the registry names another sidecar, or none`,
      );
    }
    const read = { entry, release: await verifiedRelease(entry, resolved) };
    this.entries.set(resolved.id, read);
    return read;
  }
}

export function createSidecarApp(deps: SidecarDeps): Hono {
  const app = new Hono();
  app.use("/internal/*", sharedSecret(() => deps.secrets.list("SIDECAR_SECRET")?.accepted ?? [], "sidecar"));
  if (deps.metrics) app.get(METRICS_PATH, metricsHandler(deps.metrics.metrics, () => deps.secrets.list("METRICS_SECRET")?.accepted));

  app.get(SIDECAR_PATHS.health, async (c) => {
    deps.metrics?.healthReports.inc();
    return c.json({ links: await healthLinks(deps) });
  });

  app.post(SIDECAR_PATHS.wakeJobs, async (c) => {
    await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
    deps.wakeJobs?.();
    return c.body(null, 204);
  });

  const registry = new RegistryEntries(deps);
  /**
   * The key and model of a request the edge answered from its cache, read in Postgres while the passes
   * run (key-check.ts): true when they still stand; false aborts `stale`. A failed read throws 503,
   * as the edge's own read would: the answer is never given unconfirmed.
   */
  const confirmation = (call: SidecarDecideRequest, timings: Timings, stale: AbortController): Promise<boolean> => {
    const check = { keyId: call.key_id, accountId: call.account_id, model: call.confirm!.model, release: call.release };
    const read = timings.time("key-confirm", () => keyStands(poolDb(deps.confirmPool ?? deps.pool), check)).then(
      (stands) => {
        if (!stands) stale.abort(new Error("the key or the model no longer stands as the edge kept it"));
        return stands;
      },
      () => {
        throw new ServiceError("unavailable", "the service could not check this API key; retry shortly", "the sidecar's key confirmation could not read Postgres");
      },
    );
    read.catch(() => undefined); // awaited once the passes are done
    return read;
  };
  app.post(SIDECAR_PATHS.decide, async (c) => {
    const call = await readJson(c, SidecarDecideRequest, SIDECAR_BODY);
    // Every hop's time, returned to the edge in Server-Timing (names and milliseconds only).
    const timings = new Timings();
    // When the edge's caller goes away, a waiting request leaves its lane and a running one stops
    // between passes; so does one whose kept key the confirmation finds no longer standing.
    const stale = new AbortController();
    const signal = AbortSignal.any([c.req.raw.signal, stale.signal]);
    const confirmed = call.confirm ? confirmation(call, timings, stale) : null;
    const staleReply = () => c.json({ stale: true } satisfies SidecarStale, SIDECAR_STALE_STATUS);
    let result: Execution;
    try {
      // The runtime proves its identity on every response: admission's tokenize call and every pass.
      const { entry, release } = await timings.time("registry", () => registry.get(call.release));
      // Kept prefixes serve this account alone (no timing tells it another account sent the same state).
      const client = ownedBy(timedClient(runtimeClientFor(entry, deps.secrets), timings), call.account_id);
      // Admitted (identity, labels, per-pass limits) before it takes a lane: a refusal never waits for the GPU.
      const admission = await admitDecision(client, release, call.request, signal, deps.steps);
      const queued = performance.now();
      const execute = () => {
        timings.add("queue", performance.now() - queued);
        return runDecision(client, release, admission, signal, deps.steps);
      };
      result = await deps.lanes.run("realtime", execute, signal);
    } catch (err) {
      // Under a kept key that no longer stands, any failure is that refusal (the edge then answers
      // the 401 or 404 of a key read fresh); a confirmation that could not be read leaves the failure.
      if (confirmed && !(await confirmed.catch(() => true))) return staleReply();
      throw err;
    }
    // Never an answer, nor its usage, before the kept key is confirmed.
    if (confirmed && !(await confirmed)) return staleReply();
    // Recorded after the answer, off the customer's wait; a clean shutdown flushes it.
    deps.usage.record({
      accountId: call.account_id,
      keyId: call.key_id,
      releaseId: call.release.id,
      source: "realtime",
      requestId: call.request_id,
      usage: result.usage,
    });
    c.header(SERVER_TIMING_HEADER, timings.header());
    return orderedJson(c, { answers: result.answers, usage: result.usage, passes: result.passes } satisfies SidecarDecideResponse);
  });

  app.post(SIDECAR_PATHS.imageDecide, async (c) => {
    try {
      const answered = await imageDecision(c);
      deps.metrics?.imageDecisions.inc({ outcome: "answered" });
      return answered;
    } catch (err) {
      deps.metrics?.imageDecisions.inc({ outcome: "error" });
      throw err;
    }
  });

  async function imageDecision(c: Context): Promise<Response> {
    const call = await readJson(c, SidecarImageDecideRequest, SIDECAR_BODY);
    const timings = new Timings();
    const { entry, release } = await timings.time("registry", () => registry.get(call.release));
    if (entry.modality !== "image" || !release.trained) throw new ServiceError("invalid_request", `the model ${JSON.stringify(release.id)} is not a trained image model`);
    const { id, question } = checkImageTask(savedQuestions(release.trained.task), call.request.questions);
    const client = runtimeClientFor(entry, deps.secrets);
    const signal = c.req.raw.signal;
    const queued = performance.now();
    const read = await deps.lanes.run(
      "realtime",
      () => {
        timings.add("queue", performance.now() - queued);
        const image = { image: call.image.grant, bytes: call.image.bytes, sha256: call.image.sha256 };
        return timings.time("image", () => readImageFeatures(client, runtimeOf(release), image, signal));
      },
      signal,
    );
    const answer = imageAnswer(question, applyHead(release.trained.heads.questions[0]!, read.features));
    const usage = imageUsage(read.visualTokens, call.request.state, call.request.questions);
    deps.usage.record({ accountId: call.account_id, keyId: call.key_id, releaseId: call.release.id, source: "realtime", requestId: call.request_id, usage });
    c.header(SERVER_TIMING_HEADER, timings.header());
    // Long enough for the answer to leave, too short for anything else to happen.
    if (deps.exitAfterImageAnswer) setTimeout(() => process.kill(process.pid, "SIGKILL"), 100);
    return orderedJson(c, { answers: new Map([[id, answer]]), usage, passes: 1 } satisfies SidecarDecideResponse);
  }

  app.post(SIDECAR_PATHS.preprocessImage, async (c) => {
    const request = await readJson(c, PreprocessImageRequest, { maxBytes: 16 * 1024 });
    return c.json(await finalizeImage(request, { holdMs: deps.imageHoldMs ?? 0 }));
  });

  app.notFound(notFound);
  app.onError(errorRenderer("sidecar", (code) => deps.metrics?.errors.inc({ code })));
  return app;
}

/** sidecar->postgres, then sidecar->runtime identity for every release this sidecar serves. */
async function healthLinks(deps: SidecarDeps): Promise<LinkStatus[]> {
  let entries: RegistryEntry[] = [];
  const postgres = await checkLink("sidecar->postgres", async () => {
    entries = await servedReleases(deps.pool, deps.selfUrl);
    return `${entries.length} release(s) served here`;
  });
  if (!postgres.ok) return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "registry unreadable" }];
  if (entries.length === 0) {
    return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "no serving release in the registry names this sidecar" }];
  }
  const runtimes = await Promise.all(
    entries.map((entry) =>
      checkLink(`sidecar->runtime ${entry.id}`, async () => {
        // The row checked as a decision would check it, then the runtime's own report of its identity.
        const release = await verifiedRelease(entry, entry);
        const identity = await verifiedClient(runtimeClientFor(entry, deps.secrets), runtimeOf(release)).identity(AbortSignal.timeout(2500));
        // The engine build that serves, and why not the others (runtime/gpu-probe.ts), for operators.
        return `${identity.release_id} fingerprint ${identity.fingerprint.slice(0, 12)}, engine ${identity.engine}`;
      }),
    ),
  );
  return [postgres, ...runtimes];
}
