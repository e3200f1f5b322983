/**
 * GET /v1/sign-in (runs in workerd): where the command-line tool's browser sign-in goes, so that
 * `svc login` needs nothing but the deployment's address. Unauthenticated and free of I/O; it
 * publishes only what the provider's own discovery document and a public client already reveal.
 *
 *     { "issuer": "https://login.example.com", "client_id": "svc-cli", "scope": "openid keys" }
 *
 * The client is public (no secret) and signs in with authorization code + PKCE (S256) and a loopback
 * redirect `http://127.0.0.1:<any port>/callback`.
 */
import { Hono } from "hono";
import { USER_SIGN_IN_SCOPE, type SignInTarget } from "../../contract/keys.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const signIn = new Hono<AppEnv>();

signIn.get("/v1/sign-in", (c) => {
  const { settings } = services(c.env);
  return c.json({ issuer: settings.OIDC_ISSUER, client_id: settings.OIDC_CLI_CLIENT_ID, scope: USER_SIGN_IN_SCOPE } satisfies SignInTarget);
});
