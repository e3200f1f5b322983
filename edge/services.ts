/**
 * The edge's settings and backing-service clients, built once per isolate from the Worker's bindings
 * (workerd hands every request of an isolate the same `env`). The drivers are the production ones;
 * the local stack only points them at loopback bridges, and only for a loopback DATABASE_URL.
 *
 *     const { sql, redis, settings } = services(c.env);
 */
import { neon, type NeonQueryFunction } from "@neondatabase/serverless";
import { Redis } from "@upstash/redis/cloudflare";
import { checkServiceUrl } from "../contract/urls.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { parseSettings, SettingsError } from "../server-shared/settings.ts";
import type { Env } from "./env.ts";
import { EdgeSettings } from "./settings.ts";

export interface Services {
  settings: EdgeSettings;
  sql: NeonQueryFunction<false, false>;
  redis: Redis;
}

const built = new WeakMap<Env, Services>();

export function services(env: Env): Services {
  let services = built.get(env);
  if (!services) {
    services = build(env);
    built.set(env, services);
  }
  return services;
}

function build(env: Env): Services {
  let settings: EdgeSettings;
  try {
    settings = parseSettings("edge", EdgeSettings, env as unknown as Record<string, unknown>);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    throw new ServiceError("unavailable", "the service is misconfigured; retry later", err.message);
  }
  useNeonRoute(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE));
  return {
    settings,
    sql: neon(settings.DATABASE_URL),
    redis: new Redis({
      url: settings.UPSTASH_REDIS_REST_URL,
      token: settings.UPSTASH_REDIS_REST_TOKEN,
      // Quota decisions must not be retried behind the caller's back.
      retry: false,
      enableTelemetry: false,
    }),
  };
}

/** A call to the sidecar at `sidecarUrl` with the shared secret; the URL policy refuses remote plaintext. */
export function sidecarFetch(settings: EdgeSettings, sidecarUrl: string, path: string, init: RequestInit = {}): Promise<Response> {
  const base = checkServiceUrl(sidecarUrl, "sidecar");
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${settings.SIDECAR_SECRET.send}`);
  return fetch(new URL(path, base), { ...init, headers, redirect: "manual" });
}
