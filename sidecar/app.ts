/**
 * The sidecar's HTTP surface (runs under Bun on the GPU host). Only the edge calls it, with the shared
 * sidecar secret; nothing here is reachable with a customer credential. The protocol is
 * server-shared/sidecar-protocol.ts.
 */
import type { SecretReader } from "../server-shared/secrets.ts";
import { Hono } from "hono";
import type { Pool } from "@neondatabase/serverless";
import type { LinkStatus } from "../contract/health.ts";
import { readJson } from "../server-shared/body.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { checkLink } from "../server-shared/health.ts";
import { errorRenderer, notFound, orderedJson, sharedSecret } from "../server-shared/http.ts";
import { calibratedFingerprint, type RegistryEntry } from "../server-shared/registry.ts";
import { SIDECAR_BODY, SIDECAR_PATHS, SidecarDecideRequest, type ResolvedRelease, type SidecarDecideResponse } from "../server-shared/sidecar-protocol.ts";
import { admitDecision, runDecision, type Release } from "./decide/execute.ts";
import { IdentityMismatchError } from "./decide/identity.ts";
import type { Lanes } from "./lanes.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import { identityMatches, runtimeClientFor, timedClient } from "./runtime/client.ts";
import { servedRelease, servedReleases } from "./runtime/registry.ts";
import type { UsageWriter } from "./usage.ts";

export interface SidecarDeps {
  pool: Pool;
  /** SIDECAR_SECRET (accepted from the edge) and the runtime secrets, by name, as they are now. */
  secrets: SecretReader;
  /** This sidecar's address as the registry's `sidecar_url` names it: it serves those releases only. */
  selfUrl: string;
  lanes: Lanes;
  /** Where successful usage goes, after the answer (sidecar/usage.ts). */
  usage: UsageWriter;
}

/**
 * The registry entry of a release the edge resolved, as this sidecar read and checked it. Entries
 * are kept by release id with the row revision they were read at; the edge names the revision it
 * read in the same request, so a changed row (address, assignment, retirement) is read again on the
 * next request, and an unchanged one costs no Postgres round trip.
 */
class RegistryEntries {
  private readonly entries = new Map<string, RegistryEntry>();
  constructor(private readonly deps: SidecarDeps) {}

  async get(release: ResolvedRelease): Promise<RegistryEntry> {
    const kept = this.entries.get(release.id);
    if (kept && kept.revision === release.revision && kept.fingerprint === release.fingerprint) return kept;
    const entry = await this.read(release);
    this.entries.set(release.id, entry);
    return entry;
  }

  private async read(release: ResolvedRelease): Promise<RegistryEntry> {
    const entry = await servedRelease(this.deps.pool, this.deps.selfUrl, release.id);
    if (!entry) {
      this.entries.delete(release.id);
      throw new ServiceError(
        "unavailable",
        "the model service cannot serve this model right now; retry shortly",
        `release ${release.id} is not served by this sidecar (${this.deps.selfUrl}): the registry names another sidecar, or none`,
      );
    }
    if (entry.fingerprint !== release.fingerprint) throw new IdentityMismatchError(release, { release_id: entry.id, fingerprint: entry.fingerprint });
    // A calibrated release's fingerprint must cover its parameters, so a row edited by hand is refused.
    const expected = entry.calibration ? await calibratedFingerprint(entry.runtime_fingerprint, entry.calibration) : entry.runtime_fingerprint;
    if (expected !== entry.fingerprint) throw new IdentityMismatchError(release, { release_id: entry.id, fingerprint: expected });
    return entry;
  }
}

/** The identity a release's runtime reports (its base's, for a calibrated release). */
function runtimeOf(entry: RegistryEntry): { id: string; fingerprint: string } {
  return { id: entry.runtime_release, fingerprint: entry.runtime_fingerprint };
}

export function createSidecarApp(deps: SidecarDeps): Hono {
  const app = new Hono();
  app.use("/internal/*", sharedSecret(() => deps.secrets.list("SIDECAR_SECRET")?.accepted ?? [], "sidecar"));

  app.get(SIDECAR_PATHS.health, async (c) => c.json({ links: await healthLinks(deps) }));

  const registry = new RegistryEntries(deps);
  app.post(SIDECAR_PATHS.decide, async (c) => {
    const call = await readJson(c, SidecarDecideRequest, SIDECAR_BODY);
    // Every hop's time, returned to the edge in Server-Timing (names and milliseconds only).
    const timings = new Timings();
    // The runtime proves its identity on every response: admission's tokenize call and every pass.
    const entry = await timings.time("registry", () => registry.get(call.release));
    const client = timedClient(runtimeClientFor(entry, deps.secrets), timings);
    const release: Release = { ...call.release, runtime: runtimeOf(entry), ...(entry.calibration ? { calibration: entry.calibration } : {}) };
    // When the edge's caller goes away, a waiting request leaves its lane and a running one stops between passes.
    const signal = c.req.raw.signal;
    // Admitted (identity, labels, per-pass limits) before it takes a lane: a refusal never waits for the GPU.
    const admission = await admitDecision(client, release, call.request, signal);
    const queued = performance.now();
    const execute = () => {
      timings.add("queue", performance.now() - queued);
      return runDecision(client, release, admission, signal);
    };
    const result = await deps.lanes.run("realtime", execute, signal);
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

  app.notFound(notFound);
  app.onError(errorRenderer("sidecar"));
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
        const identity = await runtimeClientFor(entry, deps.secrets).identity(AbortSignal.timeout(2500));
        if (!identityMatches(runtimeOf(entry), identity)) {
          throw new Error(`identity mismatch: runtime serves ${identity.release_id} (${identity.fingerprint.slice(0, 12)})`);
        }
        return `${identity.release_id} fingerprint ${identity.fingerprint.slice(0, 12)}`;
      }),
    ),
  );
  return [postgres, ...runtimes];
}
