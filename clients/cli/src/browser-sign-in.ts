/**
 * `svc login`'s browser sign-in (runs in a user's terminal): OAuth authorization code with PKCE
 * (S256) and a loopback redirect (RFC 8252), against the OpenID provider the deployment names.
 *
 *   1. GET {base}/v1/sign-in                         -> {issuer, client_id, scope}
 *   2. GET {issuer}/.well-known/openid-configuration -> the authorization and token endpoints
 *   3. listen on 127.0.0.1:<random port>/callback; print the sign-in address; try to open a browser
 *   4. the provider redirects the browser to the listener with `code`, `state` (and `iss`)
 *   5. POST the code and the PKCE verifier to the token endpoint -> the session's tokens
 *
 * Every address obeys the transport policy (https, or http on loopback), no redirect is followed,
 * and no code, verifier or token appears in a message.
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { SignInTarget } from "../../../contract/keys.ts";
import { checkServiceUrl } from "../../../contract/urls.ts";
import { Failure, Interrupted } from "./errors.ts";
import type { Session } from "./sdk.ts";

/** How long the listener waits for the browser to come back. */
export const SIGN_IN_WAIT_MS = 5 * 60_000;

const ProviderMetadata = z.object({ issuer: z.string(), authorization_endpoint: z.string(), token_endpoint: z.string() });

const TokenAnswer = z.object({
  access_token: z.string(),
  token_type: z.string().optional(),
  expires_in: z.number().optional(),
  refresh_token: z.string().optional(),
});

async function getJson(url: string, what: string, signal: AbortSignal): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(checkServiceUrl(url, what), { redirect: "manual", signal, headers: { accept: "application/json" } });
  } catch (err) {
    if (signal.aborted) throw new Interrupted();
    throw new Failure(`cannot reach the ${what} (${new URL(url).origin}): ${(err as Error).message}`);
  }
  if (!res.ok) throw new Failure(`the ${what} answered ${res.status}${res.status === 404 ? " (this deployment does not offer browser sign-in; use `svc login --api-key`)" : ""}`);
  try {
    return await res.json();
  } catch {
    throw new Failure(`the ${what} did not answer JSON`);
  }
}

/** Where the deployment at `baseUrl` signs its users in. */
export async function discoverSignIn(baseUrl: string, signal: AbortSignal): Promise<SignInTarget> {
  const parsed = SignInTarget.safeParse(await getJson(`${baseUrl}/v1/sign-in`, "service's sign-in route", signal));
  if (!parsed.success) throw new Failure("the service's sign-in route answered an unexpected shape");
  return parsed.data;
}

export function newVerifier(): string {
  return randomBytes(32).toString("base64url");
}

export function challengeOf(verifier: string): string {
  return createHash("sha256").update(verifier).digest("base64url");
}

/** Tries to open `url` in the user's browser; never fails (the address is printed anyway). */
export function openBrowser(url: string, env: Record<string, string | undefined>): void {
  const [command, args, options] =
    env.BROWSER
      ? [env.BROWSER, [url], {}]
      : process.platform === "darwin"
        ? ["open", [url], {}]
        : process.platform === "win32"
          ? ["cmd", ["/c", "start", '""', url.replaceAll("&", "^&")], { windowsVerbatimArguments: true }]
          : ["xdg-open", [url], {}];
  try {
    const child = spawn(command, args, { ...options, stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
  } catch {
    // No browser here: the printed address is the way.
  }
}

interface Callback {
  code: string;
}

/** Listens on 127.0.0.1 at a random port until the browser brings back the code for `state`. */
async function listen(state: string, issuer: string): Promise<{ redirectUri: string; callback: Promise<Callback>; server: Server }> {
  let settle!: { resolve: (value: Callback) => void; reject: (err: Error) => void };
  const callback = new Promise<Callback>((resolve, reject) => (settle = { resolve, reject }));
  // A refusal that arrives after the wait has ended (timeout, Ctrl-C) has no one left to tell.
  callback.catch(() => {});
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const page = (status: number, text: string) => {
      res.writeHead(status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", connection: "close" });
      res.end(`<!doctype html><meta charset="utf-8"><title>svc login</title><p>${text}</p>`);
    };
    if (req.method !== "GET" || url.pathname !== "/callback") return page(404, "Not found.");
    const params = url.searchParams;
    // A request without this sign-in's state is not the provider's answer to it: it is ignored.
    if (params.get("state") !== state) return page(400, "This sign-in link is not the one `svc login` is waiting for.");
    const iss = params.get("iss");
    if (iss !== null && iss !== issuer) {
      page(400, "Sign-in failed: the answer came from another identity provider.");
      return settle.reject(new Failure("sign-in failed: the answer came from another identity provider"));
    }
    const error = params.get("error");
    if (error) {
      page(400, "Sign-in was refused. You can close this tab; the terminal says why.");
      const description = params.get("error_description");
      return settle.reject(new Failure(`the identity provider refused the sign-in: ${error.slice(0, 100)}${description ? ` (${description.slice(0, 200)})` : ""}`));
    }
    const code = params.get("code");
    if (!code) {
      page(400, "Sign-in failed: the answer carried no code.");
      return settle.reject(new Failure("sign-in failed: the identity provider's answer carried no code"));
    }
    page(200, "Signed in. You can close this tab and return to the terminal.");
    settle.resolve({ code });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  return { redirectUri: `http://127.0.0.1:${port}/callback`, callback, server };
}

function subjectOf(token: string): string | undefined {
  try {
    const payload = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { sub?: unknown };
    return typeof payload.sub === "string" ? payload.sub : undefined;
  } catch {
    return undefined; // an opaque token: nothing to show
  }
}

export interface BrowserSignInOptions {
  target: SignInTarget;
  /** Shows the sign-in address to the user (always called, before any browser is tried). */
  announce(url: string): void;
  /** Tries to open the address in a browser. */
  open(url: string): void;
  signal: AbortSignal;
  waitMs?: number;
}

/** Runs the whole sign-in and returns the session to save. */
export async function browserSignIn(opts: BrowserSignInOptions): Promise<Session> {
  const { target, signal } = opts;
  checkServiceUrl(target.issuer, "identity provider");
  const metadata = ProviderMetadata.safeParse(await getJson(`${target.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`, "identity provider", signal));
  if (!metadata.success) throw new Failure("the identity provider's discovery document has an unexpected shape");
  if (metadata.data.issuer !== target.issuer) throw new Failure("the identity provider names another issuer than the service does");
  const authorization = checkServiceUrl(metadata.data.authorization_endpoint, "authorization endpoint");
  const tokenEndpoint = checkServiceUrl(metadata.data.token_endpoint, "token endpoint");

  const verifier = newVerifier();
  const state = randomBytes(16).toString("base64url");
  const { redirectUri, callback, server } = await listen(state, target.issuer);
  try {
    authorization.search = new URLSearchParams({
      client_id: target.client_id,
      response_type: "code",
      redirect_uri: redirectUri,
      scope: target.scope,
      state,
      code_challenge: challengeOf(verifier),
      code_challenge_method: "S256",
    }).toString();
    opts.announce(authorization.toString());
    opts.open(authorization.toString());

    const waitMs = opts.waitMs ?? SIGN_IN_WAIT_MS;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const { code } = await Promise.race([
      callback,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Failure(`no sign-in arrived within ${waitMs / 60_000} minutes`)), waitMs);
        onAbort = () => reject(new Interrupted());
        signal.addEventListener("abort", onAbort, { once: true });
      }),
    ]).finally(() => {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener("abort", onAbort);
    });

    const body = new URLSearchParams({ grant_type: "authorization_code", client_id: target.client_id, code, redirect_uri: redirectUri, code_verifier: verifier });
    let res: Response;
    try {
      res = await fetch(tokenEndpoint, { method: "POST", body, redirect: "manual", signal, headers: { accept: "application/json" } });
    } catch (err) {
      if (signal.aborted) throw new Interrupted();
      throw new Failure(`cannot reach the identity provider's token endpoint: ${(err as Error).message}`);
    }
    const json = (await res.json().catch(() => ({}))) as { error?: unknown; error_description?: unknown };
    if (!res.ok) {
      const error = typeof json.error === "string" ? json.error.slice(0, 100) : `status ${res.status}`;
      throw new Failure(`the identity provider refused the code: ${error}${typeof json.error_description === "string" ? ` (${json.error_description.slice(0, 200)})` : ""}`);
    }
    const tokens = TokenAnswer.safeParse(json);
    if (!tokens.success) throw new Failure("the identity provider's token answer has an unexpected shape");
    const expiresIn = tokens.data.expires_in ?? 3600;
    const subject = subjectOf(tokens.data.access_token);
    return {
      issuer: target.issuer,
      client_id: target.client_id,
      access_token: tokens.data.access_token,
      ...(tokens.data.refresh_token === undefined ? {} : { refresh_token: tokens.data.refresh_token }),
      expires_at: new Date(Date.now() + expiresIn * 1000).toISOString(),
      ...(subject === undefined ? {} : { subject }),
    };
  } finally {
    server.closeAllConnections();
    server.close();
  }
}
