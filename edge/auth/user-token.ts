/**
 * Verification of identity-provider user access tokens (runs in workerd; tests also run it under
 * Node). The provider is named only by settings, so a hosted provider replaces the local one
 * without code changes:
 *
 *     OIDC_ISSUER=https://login.example.com/   OIDC_AUDIENCE=svc-api
 *     OIDC_JWKS_URL=https://login.example.com/.well-known/jwks.json
 *
 *     const { subject } = await verifyUserToken(token, c.env);
 *
 * Key rotation needs nothing here: the key set is kept per isolate and refetched when a token names
 * a `kid` it does not hold (at most once per cooldown), or when it is older than its cache age.
 */
import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from "jose";
import { checkServiceUrl } from "../../contract/urls.ts";

/** The settings this file reads; the Worker's `Env` has them. */
export interface OidcSettings {
  /** Compared exactly with the token's `iss` (mind a trailing slash). */
  OIDC_ISSUER: string;
  OIDC_AUDIENCE: string;
  OIDC_JWKS_URL: string;
}

export interface VerifiedUser {
  subject: string;
  issuer: string;
}

/**
 * Why a token was refused. `unavailable` and `not_configured` are the server's fault, not the
 * caller's: the provider's keys could not be fetched, or the settings are missing or not allowed.
 */
export type UserTokenFailure =
  | "malformed"
  | "expired"
  | "wrong_issuer"
  | "wrong_audience"
  | "invalid_claims"
  | "unknown_key"
  | "bad_signature"
  | "algorithm_not_allowed"
  | "unavailable"
  | "not_configured";

/** A refused token. The message is short and never quotes the token. */
export class UserTokenError extends Error {
  constructor(
    readonly reason: UserTokenFailure,
    message: string,
  ) {
    super(message);
    this.name = "UserTokenError";
  }
}

/** A refetch for an unknown `kid` waits this long after the last fetch, so junk `kid`s cannot flood the provider. */
export const JWKS_COOLDOWN_MS = 5_000;
/** Keys are refetched this often even when every `kid` is known, so removed keys stop verifying. */
const JWKS_MAX_AGE_MS = 10 * 60_000;
/** Asymmetric only: an HMAC key would be the provider's secret, and `none` is never acceptable. */
const ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA", "Ed25519"];
/** Seconds of clock skew allowed between the provider and the edge. */
const CLOCK_TOLERANCE_S = 10;
/** Far above any real access token; refused before any parsing. */
const MAX_TOKEN_LENGTH = 8192;

const keySets = new Map<string, JWTVerifyGetKey>();

function keySet(jwksUrl: string): JWTVerifyGetKey {
  let set = keySets.get(jwksUrl);
  if (!set) {
    let url: URL;
    try {
      url = checkServiceUrl(jwksUrl, "OIDC_JWKS_URL");
    } catch (err) {
      throw new UserTokenError("not_configured", (err as Error).message);
    }
    set = createRemoteJWKSet(url, { cooldownDuration: JWKS_COOLDOWN_MS, cacheMaxAge: JWKS_MAX_AGE_MS, timeoutDuration: 5_000 });
    keySets.set(jwksUrl, set);
  }
  return set;
}

/** Verifies signature, issuer, audience and expiry; returns who the token speaks for. */
export async function verifyUserToken(token: string, env: OidcSettings): Promise<VerifiedUser> {
  if (!env.OIDC_ISSUER || !env.OIDC_AUDIENCE || !env.OIDC_JWKS_URL) {
    throw new UserTokenError("not_configured", "OIDC_ISSUER, OIDC_AUDIENCE and OIDC_JWKS_URL must be set");
  }
  if (token.length > MAX_TOKEN_LENGTH) throw new UserTokenError("malformed", "token too long");
  try {
    const { payload } = await jwtVerify(token, keySet(env.OIDC_JWKS_URL), {
      issuer: env.OIDC_ISSUER,
      audience: env.OIDC_AUDIENCE,
      algorithms: ALGORITHMS,
      requiredClaims: ["exp", "sub"],
      clockTolerance: CLOCK_TOLERANCE_S,
    });
    if (!payload.sub || !payload.iss) throw new UserTokenError("invalid_claims", "token has no subject");
    return { subject: payload.sub, issuer: payload.iss };
  } catch (err) {
    throw asUserTokenError(err);
  }
}

function asUserTokenError(err: unknown): UserTokenError {
  if (err instanceof UserTokenError) return err;
  if (err instanceof errors.JWTExpired) return new UserTokenError("expired", "token expired");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "iss") return new UserTokenError("wrong_issuer", "token from another issuer");
    if (err.claim === "aud") return new UserTokenError("wrong_audience", "token for another audience");
    return new UserTokenError("invalid_claims", `token claim "${err.claim}" invalid`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new UserTokenError("algorithm_not_allowed", "token algorithm not allowed");
  if (err instanceof errors.JWKSNoMatchingKey) return new UserTokenError("unknown_key", "token signed by an unknown key");
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSMultipleMatchingKeys) return new UserTokenError("bad_signature", "token signature invalid");
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid || err instanceof errors.JOSENotSupported) {
    return new UserTokenError("malformed", "malformed token");
  }
  // Left: the key set could not be fetched or parsed (timeout, refused connection, bad JSON).
  return new UserTokenError("unavailable", "identity provider keys unavailable");
}
