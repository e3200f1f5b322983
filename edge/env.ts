/** The edge Worker's bindings and request variables, typed once and read through Hono's context. */
import type { AccountSettings, AccountStatus } from "../server-shared/accounts.ts";
import type { DecisionRequest } from "../contract/decision.ts";
import type { KeyScope } from "../contract/keys.ts";
import type { Timings } from "../server-shared/timing.ts";
import type { Resolution } from "./models.ts";

/** What workerd binds: R2 and the raw settings (parsed once in edge/settings.ts). */
export interface Env {
  BUCKET: R2Bucket;
  /** The web console's built files (wrangler.toml `[assets]`); absent where the Worker runs without them. */
  ASSETS?: Fetcher;
  [setting: string]: unknown;
}

/** The caller's account with its quota settings, read fresh on every request (behind an API key, or a signed-in image session). */
export interface Account extends AccountSettings {
  id: string;
  status: AccountStatus;
}

/** An API key's scope and model names, as created; null: no limit. */
export interface KeyLimits {
  scope: KeyScope | null;
  models: string[] | null;
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
    /** What the request's API key was created for (contract/keys.ts): null fields allow everything. */
    keyLimits: KeyLimits;
    user: User;
    /** The caller's account id, by either credential the image routes take (edge/auth/image.ts). */
    accountId: string;
    /** Worst-case input tokens the quota gate reserves for this request (0 when unset). */
    reservedTokens: number;
    /** The validated decision request, once the decisions route has read it. */
    decision: DecisionRequest;
    /** The decision's model as the key's query resolved it; null when unknown or not allowed. */
    model: Resolution | null;
    /** The decision's key and model came from the key cache (auth/key-cache.ts): the presented key, for reading it again if the sidecar finds them stale. */
    keptKey: { id: string; token: string } | null;
    /** The hops this request has timed so far (server-shared/timing.ts). */
    timings: Timings;
  };
};
