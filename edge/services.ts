/**
 * Clients for the edge's backing services, built from the Worker's bindings. The drivers are the
 * production ones; the local stack only points them at loopback bridges.
 */
import { neon, type NeonQueryFunction } from "@neondatabase/serverless";
import { Redis } from "@upstash/redis/cloudflare";
import { useNeonLocalBridge } from "../contract/neon-local.ts";
import { checkServiceUrl } from "../contract/urls.ts";
import type { Env } from "./env.ts";

export function sql(env: Env): NeonQueryFunction<false, false> {
  useNeonLocalBridge(env.NEON_LOCAL_BRIDGE);
  return neon(env.DATABASE_URL);
}

export function redis(env: Env): Redis {
  checkServiceUrl(env.UPSTASH_REDIS_REST_URL, "UPSTASH_REDIS_REST_URL");
  return new Redis({
    url: env.UPSTASH_REDIS_REST_URL,
    token: env.UPSTASH_REDIS_REST_TOKEN,
    // Quota decisions must not be retried behind the caller's back.
    retry: false,
    enableTelemetry: false,
  });
}

/** A call to the sidecar with the shared secret; the URL policy refuses remote plaintext. */
export function sidecarFetch(env: Env, path: string, init: RequestInit = {}): Promise<Response> {
  const base = checkServiceUrl(env.SIDECAR_URL, "SIDECAR_URL");
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${env.SIDECAR_SECRET}`);
  return fetch(new URL(path, base), { ...init, headers, redirect: "manual" });
}
