/**
 * Signing in to the console (runs in the browser): OpenID Connect authorization code with PKCE
 * (S256) against the deployment's identity provider, as a public client (no secret), the redirect
 * being the console itself (`<origin>/console/`). The session is the provider's access token, kept in
 * this tab's sessionStorage until it expires or the user signs out; it is what the session-only routes
 * (keys, image models, image decisions) accept. No API key is ever stored.
 */
import type { ConsoleConfig } from "../../contract/console.ts";

export interface Session {
  accessToken: string;
  idToken: string | null;
  /** Milliseconds since the epoch. */
  expiresAt: number;
  /** The signed-in user's subject (from the access token). */
  subject: string;
}

interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
  end_session_endpoint?: string;
}

const SESSION_KEY = "svc-console.session";
const PENDING_KEY = "svc-console.pending";

export const redirectUri = () => `${location.origin}/console/`;

async function discover(issuer: string): Promise<Discovery> {
  const res = await fetch(`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
  if (!res.ok) throw new Error(`the identity provider answered ${res.status} to its discovery document`);
  return (await res.json()) as Discovery;
}

const base64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
const randomText = () => base64url(crypto.getRandomValues(new Uint8Array(32)));

/** Leaves for the provider's sign-in page; the provider sends the browser back to the console. */
export async function signIn(config: ConsoleConfig, returnTo: string): Promise<never> {
  if (!config.client_id) throw new Error("this deployment names no console client (OIDC_CONSOLE_CLIENT_ID)");
  const { authorization_endpoint } = await discover(config.issuer);
  const verifier = randomText();
  const state = randomText();
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ verifier, state, returnTo }));
  const url = new URL(authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: config.client_id,
    redirect_uri: redirectUri(),
    scope: config.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  }).toString();
  location.assign(url);
  return new Promise(() => {});
}

/**
 * Where the provider sent the browser back (`?code=…&state=…` or `?error=…`): exchanges the code for
 * the session and returns the page the user was on; null when this is not such a return.
 */
export async function completeSignIn(config: ConsoleConfig): Promise<string | null> {
  const params = new URLSearchParams(location.search);
  const state = params.get("state");
  if (!state || !(params.has("code") || params.has("error"))) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) ?? "null") as { verifier: string; state: string; returnTo: string } | null;
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", "/console/");
  if (!pending || pending.state !== state) throw new Error("this sign-in was not started here, or was already used: sign in again");
  if (params.has("error")) throw new Error(`the identity provider refused the sign-in: ${params.get("error_description") ?? params.get("error")}`);
  const { token_endpoint } = await discover(config.issuer);
  const res = await fetch(token_endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code")!,
      redirect_uri: redirectUri(),
      client_id: config.client_id!,
      code_verifier: pending.verifier,
    }),
  });
  const body = (await res.json().catch(() => ({}))) as { access_token?: string; id_token?: string; expires_in?: number; error_description?: string };
  if (!res.ok || !body.access_token) throw new Error(`the identity provider did not issue a session: ${body.error_description ?? res.status}`);
  const claims = JSON.parse(atob(body.access_token.split(".")[1]!.replaceAll("-", "+").replaceAll("_", "/"))) as { sub?: string };
  const session: Session = {
    accessToken: body.access_token,
    idToken: body.id_token ?? null,
    expiresAt: Date.now() + (body.expires_in ?? 3600) * 1000,
    subject: claims.sub ?? "",
  };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  return pending.returnTo;
}

/** The session of this tab, while it lasts. */
export function currentSession(): Session | null {
  const session = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? "null") as Session | null;
  if (session && session.expiresAt > Date.now() + 10_000) return session;
  sessionStorage.removeItem(SESSION_KEY);
  return null;
}

/**
 * Ends the session here, then at the provider, which sends the browser back to the console; where the
 * provider has no end-session endpoint, the console is loaded again, signed out.
 */
export async function signOut(config: ConsoleConfig): Promise<never> {
  const session = currentSession();
  sessionStorage.removeItem(SESSION_KEY);
  const { end_session_endpoint } = await discover(config.issuer).catch(() => ({ end_session_endpoint: undefined }));
  if (!end_session_endpoint || !config.client_id) {
    location.assign(redirectUri());
    return new Promise(() => {});
  }
  const url = new URL(end_session_endpoint);
  url.search = new URLSearchParams({
    client_id: config.client_id,
    post_logout_redirect_uri: redirectUri(),
    ...(session?.idToken ? { id_token_hint: session.idToken } : {}),
  }).toString();
  location.assign(url);
  return new Promise(() => {});
}
