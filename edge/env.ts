/** The edge Worker's bindings and settings, typed once and read through Hono's context. */
export interface Env {
  BUCKET: R2Bucket;
  /** Postgres connection string (Neon in production). */
  DATABASE_URL: string;
  /** `127.0.0.1:<port>` of the local Neon bridge; unset in production. */
  NEON_LOCAL_BRIDGE?: string;
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  /** Base URL of the sidecar on the GPU host, and the secret shared with it. */
  SIDECAR_URL: string;
  SIDECAR_SECRET: string;
}

export type AppEnv = { Bindings: Env; Variables: { requestId: string } };
