/** The edge Worker's bindings and settings, typed once and read through Hono's context. */
import type { AccountSettings, AccountStatus } from "../contract/accounts.ts";
import type { DecisionRequest } from "../contract/decision.ts";

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
  /** The identity provider whose user access tokens manage keys. */
  OIDC_ISSUER: string;
  OIDC_AUDIENCE: string;
  OIDC_JWKS_URL: string;
  /** The one browser origin allowed to call the API (CORS); unset allows none. */
  ALLOWED_ORIGIN?: string;
}

/** The account behind an authenticated API key, read fresh on every request. */
export interface Account extends AccountSettings {
  id: string;
  status: AccountStatus;
}

/** The signed-in user behind a verified user access token. */
export interface User {
  issuer: string;
  subject: string;
}

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    account: Account;
    keyId: string;
    user: User;
    /** Worst-case input tokens the quota gate reserves for this request (0 when unset). */
    reservedTokens: number;
    /** The validated decision request, once the decisions route has read it. */
    decision: DecisionRequest;
  };
};
