/**
 * A user access token from the local OpenID provider, obtained the way the CLI's `svc login` gets
 * one: authorization code + PKCE with a loopback redirect. Runs on a developer machine or in tests
 * (Bun or Node), never in production.
 *
 *     const token = await getUserAccessToken({ issuer: idp.issuer, login: "alice" });
 *
 * It plays the browser over plain HTTP: follows the sign-in pages, submits the login and consent
 * forms, and reads the code from the redirect's Location header, so no loopback listener is needed.
 * No code, verifier or token ever appears in an error message.
 */
import { createHash, randomBytes, randomInt } from "node:crypto";
import { USER_SIGN_IN_SCOPE } from "../contract/keys.ts";
import { CLI_CLIENT_ID } from "./idp.ts";

/** An OAuth error from the provider (`code` is the OAuth error code), or an unexpected page. */
export class SignInError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export interface SignInOptions {
  issuer: string;
  clientId?: string;
  /** The development user's login name; it becomes the token's subject. */
  login?: string;
}

export interface AuthorizeOptions extends SignInOptions {
  /** Defaults to a random loopback port, as a CLI's listener would have. */
  redirectUri?: string;
  /** The S256 challenge to send; `null` sends none (to show that the provider refuses that). */
  codeChallenge: string | null;
  scope?: string;
}

export interface TokenResponse {
  access_token: string;
  token_type: string;
  expires_in: number;
  id_token?: string;
  refresh_token?: string;
  scope?: string;
}

interface Endpoints {
  authorization_endpoint: string;
  token_endpoint: string;
}

export function newCodeVerifier(): string {
  return randomBytes(32).toString("base64url");
}

export function codeChallengeOf(verifier: string): string {
  return createHash("sha256").update(verifier).digest("base64url");
}

async function endpoints(issuer: string): Promise<Endpoints> {
  const res = await fetch(`${issuer}/.well-known/openid-configuration`, { redirect: "error" });
  if (!res.ok) throw new SignInError("discovery_failed", `GET discovery answered ${res.status}`);
  return (await res.json()) as Endpoints;
}

/** Cookies of one sign-in, as a browser keeps them: by name and path, removed when expired. */
class CookieJar {
  readonly #cookies = new Map<string, { value: string; path: string }>();

  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = "", ...attrs] = line.split(";").map((part) => part.trim());
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq);
      const path = attrs.find((a) => /^path=/i.test(a))?.slice(5) || "/";
      const expires = attrs.find((a) => /^expires=/i.test(a))?.slice(8);
      const gone = attrs.some((a) => /^max-age=0$/i.test(a)) || (expires !== undefined && Date.parse(expires) <= Date.now());
      const key = `${name};${path}`;
      if (gone) this.#cookies.delete(key);
      else this.#cookies.set(key, { value: pair.slice(eq + 1), path });
    }
  }

  header(url: URL): string {
    return [...this.#cookies]
      .filter(([, c]) => url.pathname === c.path || url.pathname.startsWith(c.path.endsWith("/") ? c.path : `${c.path}/`))
      .map(([key, c]) => `${key.split(";")[0]}=${c.value}`)
      .join("; ");
  }
}

/** The hidden `prompt` value and action of the provider's sign-in or consent form. */
function formOf(html: string, pageUrl: URL): { action: URL; prompt: string } | undefined {
  const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
  const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
  if (!action || !prompt) return undefined;
  return { action: new URL(action.replaceAll("&amp;", "&"), pageUrl), prompt };
}

/**
 * Runs the browser part of the flow and returns the authorization code that the provider sent to
 * the loopback redirect URI. Throws `SignInError` when the provider refuses the request.
 */
export async function authorize(opts: AuthorizeOptions): Promise<{ code: string; redirectUri: string }> {
  const { authorization_endpoint } = await endpoints(opts.issuer);
  const redirectUri = opts.redirectUri ?? `http://127.0.0.1:${randomInt(49152, 65535)}/callback`;
  const state = randomBytes(16).toString("base64url");
  const url = new URL(authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: opts.clientId ?? CLI_CLIENT_ID,
    response_type: "code",
    redirect_uri: redirectUri,
    scope: opts.scope ?? USER_SIGN_IN_SCOPE,
    state,
    ...(opts.codeChallenge === null ? {} : { code_challenge: opts.codeChallenge, code_challenge_method: "S256" }),
  }).toString();

  const jar = new CookieJar();
  let request: { url: URL; body?: URLSearchParams } = { url };
  for (let step = 0; step < 20; step++) {
    const res = await fetch(request.url, {
      method: request.body ? "POST" : "GET",
      body: request.body,
      headers: { cookie: jar.header(request.url) },
      redirect: "manual",
    });
    jar.store(res);
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      const next = new URL(location, request.url);
      if (`${next.origin}${next.pathname}` === `${new URL(redirectUri).origin}${new URL(redirectUri).pathname}`) {
        return { code: codeFromRedirect(next, state, opts.issuer), redirectUri };
      }
      request = { url: next };
      continue;
    }
    const html = await res.text();
    const form = res.status === 200 ? formOf(html, request.url) : undefined;
    if (!form) throw pageError(html, `${request.url.pathname} answered ${res.status}`);
    const fields: Record<string, string> =
      form.prompt === "login" ? { prompt: "login", login: opts.login ?? "dev-user", password: "local" } : { prompt: form.prompt };
    request = { url: form.action, body: new URLSearchParams(fields) };
  }
  throw new SignInError("sign_in_failed", "too many redirects");
}

function codeFromRedirect(location: URL, state: string, issuer: string): string {
  const params = location.searchParams;
  const error = params.get("error");
  if (error) throw new SignInError(error, params.get("error_description") ?? "refused");
  // The state and iss checks are what a real client does against mix-up and forged redirects.
  if (params.get("state") !== state) throw new SignInError("invalid_state", "the redirect carried another state");
  if (params.get("iss") !== issuer) throw new SignInError("invalid_issuer", "the redirect came from another issuer");
  const code = params.get("code");
  if (!code) throw new SignInError("invalid_response", "the redirect carried no code");
  return code;
}

/** The OAuth error that an oidc-provider error page shows (`<pre><strong>error</strong>: ...</pre>`). */
function pageError(html: string, fallback: string): SignInError {
  const field = (name: string) => new RegExp(`<strong>${name}</strong>: ([^<]*)</pre>`).exec(html)?.[1]?.trim();
  return new SignInError(field("error") ?? "sign_in_failed", field("error_description") ?? fallback);
}

/** Exchanges a code at the token endpoint; `codeVerifier` omitted sends none. */
export async function redeemCode(opts: {
  issuer: string;
  clientId?: string;
  code: string;
  redirectUri: string;
  codeVerifier?: string;
}): Promise<TokenResponse> {
  const { token_endpoint } = await endpoints(opts.issuer);
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    client_id: opts.clientId ?? CLI_CLIENT_ID,
    code: opts.code,
    redirect_uri: opts.redirectUri,
    ...(opts.codeVerifier === undefined ? {} : { code_verifier: opts.codeVerifier }),
  });
  const res = await fetch(token_endpoint, { method: "POST", body, redirect: "error" });
  const json = (await res.json()) as TokenResponse & { error?: string; error_description?: string };
  if (!res.ok) throw new SignInError(json.error ?? "token_failed", json.error_description ?? `token endpoint answered ${res.status}`);
  return json;
}

/** A user access token (a JWT for the `svc-api` audience) for `login`, by the full PKCE flow. */
export async function getUserAccessToken(opts: SignInOptions): Promise<string> {
  const verifier = newCodeVerifier();
  const { code, redirectUri } = await authorize({ ...opts, codeChallenge: codeChallengeOf(verifier) });
  const tokens = await redeemCode({ ...opts, code, redirectUri, codeVerifier: verifier });
  return tokens.access_token;
}
