/**
 * The edge Worker's settings (wrangler vars and secrets), parsed with zod once per isolate, the first
 * time a request needs them. A missing or bad setting answers 503 and logs one line naming it.
 *
 *   DATABASE_URL                Postgres connection string: Neon's in production (reached at Neon's own
 *                               endpoints), a loopback Postgres locally (server-shared/neon-route.ts)
 *   NEON_LOCAL_BRIDGE           `127.0.0.1:<port>` of the local Neon bridge: required for a loopback
 *                               DATABASE_URL, refused for a remote one
 *   UPSTASH_REDIS_REST_URL      Upstash REST endpoint (quota windows), and its token:
 *   UPSTASH_REDIS_REST_TOKEN
 *   SIDECAR_SECRET              shared with every sidecar (which sidecar serves a release is the registry's);
 *                               `new,old` while rotating: the first is sent, both are accepted
 *   METRICS_SECRET              the operator's read-only secret (the sidecars' and runtimes' /metrics take
 *                               it too): GET /health gives its bearer every link's report. A list while
 *                               rotating; unset: everyone gets the public answer
 *   OIDC_ISSUER, OIDC_AUDIENCE, OIDC_JWKS_URL   the identity provider whose user tokens manage keys
 *   OIDC_CLI_CLIENT_ID          the provider's public client for `svc login` (GET /v1/sign-in); default svc-cli
 *   OIDC_CONSOLE_CLIENT_ID      the provider's public client for the web console (/console, a single-page
 *                               application: code + PKCE, redirect <base_url>/console/); unset: no sign-in there
 *   ALLOWED_ORIGIN              the one browser origin allowed (CORS); unset allows none
 *   STORAGE_ACCESS_KEY_ID,      the key pair that signs storage grants (edge/storage.ts): an R2 API
 *   STORAGE_SECRET_ACCESS_KEY   token's S3 credentials when grants point at R2, any random pair otherwise
 *   STORAGE_ENDPOINT            `https://<account>.r2.cloudflarestorage.com/<bucket>` to send uploads
 *                               straight to R2; unset: the edge serves them at /storage over its binding
 *   PUBLIC_URL                  the service's public base URL (`https://decide.example.com`): where the
 *                               grants clients are given point when STORAGE_ENDPOINT is unset. Never
 *                               the request's Host header, which the caller chooses.
 *   INTERNAL_URL                where sidecars and runtimes reach this edge, when that differs from
 *                               PUBLIC_URL: the grants handed to them point there; unset: PUBLIC_URL
 *   IMAGE_API                   `on`: the image routes take the owner's API key (default off: they do
 *                               not exist for an API key). Edge-only: no sidecar redeploy.
 *   IMAGE_BROWSER               `on`: the image routes take a signed-in user's access token, and the
 *                               browser routes of the image vertical exist (default off). Edge-only.
 *   WEBHOOK_SECRET_KEY          seals webhook signing secrets in the database (server-shared/webhook-secrets.ts):
 *                               the base64 of 32 random bytes, the same list as every sidecar's;
 *                               `new,old` while rotating: the first seals (docs/deploy.md)
 *   WEBHOOK_PRIVATE_TARGETS     `on`: webhook endpoints may be loopback or private addresses, and
 *                               loopback ones plain http:// (the local stack's receivers). Default off:
 *                               public HTTPS only (contract/webhooks.ts). Never on in production.
 *   SVC_TEST_IMAGE_RETENTION_MS, SVC_TEST_IMAGE_UPLOAD_MS   tests only: shorter image retention and
 *                               upload validity (never set in production)
 */
import { z } from "zod";
import { checkNeonRoute } from "../server-shared/neon-route.ts";
import { LIMITS } from "../contract/limits.ts";
import { flag, optional, optionalInteger, optionalSecretList, optionalServiceUrl, required, secretList, serviceUrl, webhookKeyList } from "../server-shared/settings.ts";

export const EdgeSettings = z.object({
  DATABASE_URL: required(),
  NEON_LOCAL_BRIDGE: optional(),
  UPSTASH_REDIS_REST_URL: serviceUrl(),
  UPSTASH_REDIS_REST_TOKEN: required(),
  SIDECAR_SECRET: secretList(),
  METRICS_SECRET: optionalSecretList(),
  OIDC_ISSUER: required(),
  OIDC_AUDIENCE: required(),
  OIDC_JWKS_URL: serviceUrl(),
  OIDC_CLI_CLIENT_ID: optional().transform((value) => value ?? "svc-cli"),
  OIDC_CONSOLE_CLIENT_ID: optional(),
  ALLOWED_ORIGIN: optional(),
  STORAGE_ACCESS_KEY_ID: required(),
  STORAGE_SECRET_ACCESS_KEY: required(),
  STORAGE_ENDPOINT: optionalServiceUrl(),
  PUBLIC_URL: serviceUrl(),
  INTERNAL_URL: optionalServiceUrl(),
  IMAGE_API: flag("off"),
  IMAGE_BROWSER: flag("off"),
  WEBHOOK_SECRET_KEY: webhookKeyList(),
  WEBHOOK_PRIVATE_TARGETS: flag("off"),
  SVC_TEST_IMAGE_RETENTION_MS: optionalInteger(1000, LIMITS.imagePredictionRetentionMs),
  SVC_TEST_IMAGE_UPLOAD_MS: optionalInteger(1000, LIMITS.imageUploadValidityMs),
}).superRefine(checkNeonRoute);
export type EdgeSettings = z.infer<typeof EdgeSettings>;
