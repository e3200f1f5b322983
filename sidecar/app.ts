/**
 * The sidecar's HTTP surface (runs under Bun on the GPU host). Only the edge calls it, with the shared
 * sidecar secret; nothing here is reachable with a customer credential.
 */
import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Pool } from "@neondatabase/serverless";
import { bearerToken, secretsEqual } from "../contract/crypto.ts";
import { errorBody, ServiceError } from "../contract/errors.ts";
import { checkLink, type LinkStatus } from "../contract/health.ts";
import { RegistryEntry, SELECT_SERVING_RELEASES } from "../contract/registry.ts";
import { SIDECAR_PATHS, SidecarDecideRequest, type ResolvedRelease, type SidecarDecideResponse } from "../contract/sidecar-protocol.ts";
import { executeDecision, IdentityMismatchError } from "./decide/execute.ts";
import { LabelError } from "./decide/labels.ts";
import type { Identity } from "../contract/runtime-protocol.ts";
import type { Lanes } from "./lanes.ts";
import { identityMatches, runtimeClientFor, RuntimeError, type RuntimeClient } from "./runtime/client.ts";
import { recordUsage } from "./usage.ts";

export interface SidecarDeps {
  pool: Pool;
  secret: string;
  /** Where runtime secrets are read from (the variable a registry entry's `token_env` names). */
  env: Record<string, string | undefined>;
  lanes: Lanes;
}

/** The identity check before a request is admitted to a lane; every pass is checked again. */
async function verifiedClient(release: ResolvedRelease, env: SidecarDeps["env"]): Promise<{ client: RuntimeClient; identity: Identity }> {
  const client = runtimeClientFor(release, env);
  const identity = await client.identity(AbortSignal.timeout(5000));
  if (!identityMatches({ id: release.id, fingerprint: release.fingerprint }, identity)) {
    throw new IdentityMismatchError(release, identity);
  }
  return { client, identity };
}

export function createSidecarApp(deps: SidecarDeps): Hono {
  const app = new Hono();

  app.use("/internal/*", async (c, next) => {
    const token = bearerToken(c.req.header("authorization"));
    if (!token || !(await secretsEqual(token, deps.secret))) {
      return c.json(errorBody("unauthorized", "sidecar secret missing or wrong"), 401);
    }
    await next();
  });

  app.get(SIDECAR_PATHS.health, async (c) => c.json({ links: await healthLinks(deps) }));

  app.post(SIDECAR_PATHS.decide, async (c) => {
    const parsed = SidecarDecideRequest.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) throw new ServiceError("invalid_request", "malformed decide call from the edge");
    const call = parsed.data;
    const { client, identity } = await verifiedClient(call.release, deps.env);
    const release = { ...call.release, maxTokensPerPass: identity.max_tokens_per_pass };
    // When the edge's caller goes away, a waiting request leaves its lane and a running one stops between passes.
    const signal = c.req.raw.signal;
    const result = await deps.lanes.run("realtime", () => executeDecision(client, release, call.request, signal), signal);
    await recordUsage(deps.pool, {
      accountId: call.account_id,
      keyId: call.key_id,
      releaseId: call.release.id,
      source: "realtime",
      requestId: call.request_id,
      usage: result.usage,
    });
    return c.json({ answers: result.answers, usage: result.usage, passes: result.passes } satisfies SidecarDecideResponse);
  });

  app.notFound((c) => c.json(errorBody("not_found", "no such sidecar route"), 404));
  app.onError((err, c) => {
    if (err instanceof ServiceError) return c.json(err.toBody(), err.status as ContentfulStatusCode);
    // Operator log lines name the release and what differed, never request content.
    if (err instanceof IdentityMismatchError) {
      console.error(`sidecar: refusing release ${err.release.id}: ${err.message}`);
      return c.json(errorBody("identity_mismatch", "the model runtime does not serve the registered release; no answer was produced"), 503);
    }
    if (err instanceof LabelError) {
      console.error(`sidecar: release cannot be used with this rendering: ${err.message}`);
      return c.json(errorBody("unavailable", "the model cannot answer this question type"), 503);
    }
    if (err instanceof RuntimeError) {
      console.error(`sidecar: runtime call failed (${err.code}, status ${err.status})`);
      return c.json(errorBody("unavailable", "the model runtime is unavailable; retry shortly"), 503);
    }
    console.error(`sidecar error: ${err.name}`);
    return c.json(errorBody("internal_error", "sidecar internal error"), 500);
  });
  return app;
}

/** sidecar->postgres, then sidecar->runtime identity for every serving release. */
async function healthLinks(deps: SidecarDeps): Promise<LinkStatus[]> {
  let entries: RegistryEntry[] = [];
  const postgres = await checkLink("sidecar->postgres", async () => {
    const { rows } = await deps.pool.query(SELECT_SERVING_RELEASES);
    entries = rows.map((row) => RegistryEntry.parse(row));
    return `${entries.length} serving release(s)`;
  });
  if (!postgres.ok) return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "registry unreadable" }];
  if (entries.length === 0) {
    return [postgres, { name: "sidecar->runtime", ok: false, latency_ms: 0, error: "no serving release in the registry" }];
  }
  const runtimes = await Promise.all(
    entries.map((entry) =>
      checkLink(`sidecar->runtime ${entry.id}`, async () => {
        const identity = await runtimeClientFor(entry, deps.env).identity(AbortSignal.timeout(2500));
        if (!identityMatches(entry, identity)) {
          throw new Error(`identity mismatch: runtime serves ${identity.release_id} (${identity.fingerprint.slice(0, 12)})`);
        }
        return `${identity.release_id} fingerprint ${identity.fingerprint.slice(0, 12)}`;
      }),
    ),
  );
  return [postgres, ...runtimes];
}
