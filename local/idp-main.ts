/**
 * Entry of the local OpenID provider (`bun local/idp-main.ts`, started by local/idp.ts; runs on a
 * developer machine or in tests, never in production). A real oidc-provider with two public clients,
 * `svc-cli` and the web console's `svc-console`, which sign in with authorization code + PKCE and a
 * loopback redirect, and receive JWT access tokens for the `svc-api` resource. The console's client
 * is registered as native, so that its redirect (the edge's `/console/`) matches on any loopback port
 * (RFC 8252, section 7.3), and its token calls are allowed from that origin (CORS).
 *
 * Any login name is accepted at the sign-in page and becomes the token's subject, so tests and
 * developers can act as several users. Settings: IDP_PORT, IDP_DATA_DIR (holds idp-keys.json).
 */
import { randomBytes } from "node:crypto";
import Provider, { errors } from "oidc-provider";
import { CLI_CLIENT_ID, CLI_REDIRECT_URI, CONSOLE_CLIENT_ID, CONSOLE_REDIRECT_URI, loadIdpKeys, SIGNING_ALG, SVC_API_AUDIENCE } from "./idp.ts";

const port = Number(process.env.IDP_PORT);
const dataDir = process.env.IDP_DATA_DIR;
if (!port || !dataDir) {
  console.error("IDP_PORT and IDP_DATA_DIR must be set");
  process.exit(2);
}

const issuer = `http://127.0.0.1:${port}`;

/** Whether `origin` is `uri`'s scheme and loopback host on any port. */
function sameLoopbackHost(uri: string, origin: string): boolean {
  const a = URL.parse(uri);
  const b = URL.parse(origin);
  return !!a && !!b && a.protocol === "http:" && b.protocol === "http:" && a.hostname === "127.0.0.1" && b.hostname === "127.0.0.1";
}
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
    {
      client_id: CONSOLE_CLIENT_ID,
      application_type: "native",
      token_endpoint_auth_method: "none",
      redirect_uris: [CONSOLE_REDIRECT_URI],
      post_logout_redirect_uris: [CONSOLE_REDIRECT_URI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
    },
  ],
  // A browser's token call comes from the page's origin: the origin of one of the client's redirects,
  // whatever its loopback port.
  clientBasedCORS: (_ctx: unknown, origin: string, client: { redirectUris: string[] }) => client.redirectUris.some((uri) => sameLoopbackHost(uri, origin)),
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
