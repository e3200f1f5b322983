/**
 * Entry of the local OpenID provider (`bun local/idp-main.ts`, started by local/idp.ts; runs on a
 * developer machine or in tests, never in production). A real oidc-provider with one public native
 * client, `svc-cli`, which signs in with authorization code + PKCE and a loopback redirect, and
 * receives JWT access tokens for the `svc-api` resource.
 *
 * Any login name is accepted at the sign-in page and becomes the token's subject, so tests and
 * developers can act as several users. Settings: IDP_PORT, IDP_DATA_DIR (holds idp-keys.json).
 */
import { randomBytes } from "node:crypto";
import Provider, { errors } from "oidc-provider";
import { CLI_CLIENT_ID, CLI_REDIRECT_URI, loadIdpKeys, SIGNING_ALG, SVC_API_AUDIENCE } from "./idp.ts";

const port = Number(process.env.IDP_PORT);
const dataDir = process.env.IDP_DATA_DIR;
if (!port || !dataDir) {
  console.error("IDP_PORT and IDP_DATA_DIR must be set");
  process.exit(2);
}

const issuer = `http://127.0.0.1:${port}`;
// oidc-provider wants resource indicators to be absolute URIs; the token's `aud` is the plain name.
const RESOURCE = `urn:${SVC_API_AUDIENCE}`;
const API_SCOPE = "keys";
const HOUR = 60 * 60;

const provider = new Provider(issuer, {
  jwks: { keys: await loadIdpKeys(dataDir) },
  clients: [
    {
      client_id: CLI_CLIENT_ID,
      application_type: "native",
      token_endpoint_auth_method: "none",
      redirect_uris: [CLI_REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    },
  ],
  clientDefaults: { id_token_signed_response_alg: SIGNING_ALG },
  responseTypes: ["code"],
  // A public client has no secret, so every code must be bound to a verifier (S256 is the only method).
  pkce: { required: () => true },
  scopes: ["openid", "offline_access", API_SCOPE],
  // The CLI stays signed in past the token's hour without asking for `offline_access` + consent.
  issueRefreshToken: (_ctx: unknown, client: { grantTypeAllowed(type: string): boolean }) => client.grantTypeAllowed("refresh_token"),
  // Sessions are signed with throwaway keys: a restart signs everyone out of the browser session,
  // which is harmless locally; issued access tokens stay valid because they depend only on the JWKS.
  cookies: { keys: [randomBytes(32).toString("base64url")] },
  findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx: unknown, indicator: string) => {
        if (indicator !== RESOURCE) throw new errors.InvalidTarget();
        return {
          scope: API_SCOPE,
          audience: SVC_API_AUDIENCE,
          accessTokenFormat: "jwt",
          accessTokenTTL: HOUR,
          jwt: { sign: { alg: SIGNING_ALG } },
        };
      },
    },
  },
  ttl: {
    AccessToken: HOUR,
    AuthorizationCode: 60,
    IdToken: HOUR,
    Interaction: 10 * 60,
    Session: 24 * HOUR,
    Grant: 24 * HOUR,
    RefreshToken: 24 * HOUR,
  },
});

// Errors are logged by message only: their context would hold codes, tokens and cookies.
provider.on("server_error", (_ctx, err) => console.error(`idp server error: ${err.message}`));

provider.listen(port, "127.0.0.1", () => console.error(`idp listening at ${issuer}`));
