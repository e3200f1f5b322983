/**
 * The real-time decision route (runs in the sidecar; only the edge calls it, with the sidecar
 * secret): a request the edge authenticated and resolved, admitted and run in the real-time lane,
 * its answer and usage. The protocol is server-shared/sidecar-protocol.ts.
 *
 *   POST /internal/decide SidecarDecideRequest -> SidecarDecideResponse, or SIDECAR_STALE_STATUS when a kept key no longer stands
 */
import { Hono } from "hono";
import { readJson } from "../../server-shared/body.ts";
import { poolDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { keyStands } from "../../server-shared/key-check.ts";
import {
  SIDECAR_BODY,
  SIDECAR_PATHS,
  SidecarDecideRequest,
  SIDECAR_STALE_STATUS,
  type SidecarDecideResponse,
  type SidecarStale,
} from "../../server-shared/sidecar-protocol.ts";
import { SERVER_TIMING_HEADER, Timings } from "../../server-shared/timing.ts";
import type { SidecarDeps } from "../app.ts";
import { admitDecision, runDecision, type Execution } from "../decide/execute.ts";
import type { RegistryEntries } from "../decide/registry-entries.ts";
import { ownedBy, runtimeClientFor, timedClient } from "../runtime/client.ts";

export function decisionRoutes(deps: SidecarDeps, registry: RegistryEntries): Hono {
  const app = new Hono();
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

  return app;
}
