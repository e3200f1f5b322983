/**
 * `svc login` and `svc logout` (run in a user's terminal).
 *
 *     svc login --api-key [--base-url URL]      prompt for a key (no echo), check it, save it
 *     svc login --api-key - [--base-url URL]    read the key from standard input
 *     svc login [--base-url URL] [--no-browser] browser sign-in (PKCE); saves a session, no API key
 *     svc logout                                forget the saved key and session (the key stays valid)
 *
 * A key is saved only after GET /v1/models accepted it, and by an atomic replace, so a refused key
 * leaves the previous file exactly as it was. Credentials saved for one deployment are dropped when
 * a login names another: a key is never sent to a host it was not saved for.
 */
import { rmSync } from "node:fs";
import type { ReadStream } from "node:tty";
import { browserSignIn, discoverSignIn, openBrowser } from "../browser-sign-in.ts";
import type { Command } from "../command.ts";
import type { Context } from "../context.ts";
import { Failure, UsageError } from "../errors.ts";
import { readSecret } from "../prompt.ts";
import {
  APIConnectionError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  Client,
  configPath,
  forgetSaved,
  normalizeBaseUrl,
  readSaved,
  SettingsError,
  writeSaved,
  type SavedSettings,
} from "../sdk.ts";

/** A key is one short line; anything longer on standard input is not a key. */
const KEY_MAX_BYTES = 4096;

/** The deployment a login goes to: --base-url, else SVC_BASE_URL, else the saved one. */
function loginBaseUrl(ctx: Context, flag: string | undefined, saved: SavedSettings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--base-url");
  if (ctx.env.SVC_BASE_URL) return normalizeBaseUrl(ctx.env.SVC_BASE_URL, "SVC_BASE_URL");
  if (saved.base_url) return normalizeBaseUrl(saved.base_url, "the saved base_url");
  throw new UsageError("name the deployment to sign in to with --base-url URL (or SVC_BASE_URL)");
}

async function readKeyFromStdin(stdin: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    size += bytes.length;
    if (size > KEY_MAX_BYTES) throw new UsageError("standard input holds more than one API key");
    chunks.push(bytes);
  }
  return Buffer.concat(chunks).toString("utf8").trim();
}

async function obtainKey(ctx: Context, fromStdin: boolean): Promise<string> {
  if (fromStdin) return readKeyFromStdin(ctx.stdin);
  if (!ctx.stdin.isTTY || !ctx.stdin.setRawMode) {
    throw new UsageError("standard input is not a terminal, so the key cannot be typed without echo: pipe it in with `svc login --api-key -`");
  }
  return readSecret(ctx.stdin as ReadStream, ctx.stderr, "API key: ");
}

async function loginWithKey(ctx: Context, baseUrl: string, fromStdin: boolean, saved: SavedSettings, path: string): Promise<void> {
  const key = await obtainKey(ctx, fromStdin);
  if (key === "") throw new UsageError("no API key was given");
  // A header cannot carry these; saying so beats a confusing connection error.
  if ([...key].some((char) => char <= " " || char === "\u007f")) throw new UsageError("that is not an API key (it contains spaces or control characters)");

  const client = new Client({ apiKey: key, baseURL: baseUrl, maxRetries: 0 });
  let count: number;
  try {
    count = (await client.models.list({ signal: ctx.signal })).models.length;
  } catch (err) {
    if (err instanceof APIUserAbortError) throw err;
    const kept = "the saved credentials were not changed";
    if (err instanceof AuthenticationError) throw new Failure(`the service refused this key (${err.summary}); ${kept}`);
    if (err instanceof APIConnectionError) throw new Failure(`could not check the key: ${err.message}; ${kept}`);
    if (err instanceof APIError) throw new Failure(`could not check the key: ${err.summary}; ${kept}`);
    throw err;
  }

  const next: SavedSettings = { ...saved, base_url: baseUrl, api_key: key };
  if (saved.session && saved.base_url !== baseUrl) {
    delete next.session;
    ctx.status(`The browser session saved for ${saved.base_url ?? "another deployment"} was removed: it belongs to another deployment.`);
  }
  writeSaved(path, next);
  ctx.status(`Signed in to ${baseUrl} with an API key (${count} model${count === 1 ? "" : "s"} available). Saved to ${path}.`);
  if (ctx.env.SVC_API_KEY) ctx.status("Note: SVC_API_KEY is set in this environment, and it takes precedence over the saved key.");
}

async function loginWithBrowser(ctx: Context, baseUrl: string, openIt: boolean, saved: SavedSettings, path: string): Promise<void> {
  const target = await discoverSignIn(baseUrl, ctx.signal);
  const session = await browserSignIn({
    target,
    signal: ctx.signal,
    announce: (url) => ctx.status(`To sign in, open this address in a browser:\n\n  ${url}\n\nWaiting for the browser (Ctrl-C to stop)...`),
    open: (url) => {
      if (openIt) openBrowser(url, ctx.env);
    },
  });
  const next: SavedSettings = { ...saved, base_url: baseUrl, session };
  if (saved.api_key && saved.base_url !== baseUrl) {
    delete next.api_key;
    ctx.status(`The API key saved for ${saved.base_url ?? "another deployment"} was removed: it belongs to another deployment.`);
  }
  writeSaved(path, next);
  ctx.status(`Signed in to ${baseUrl}${session.subject ? ` as ${session.subject}` : ""}. Saved the session to ${path}.`);
  ctx.status("This sign-in creates no API key: decisions need one (`svc keys create NAME` makes one, `svc login --api-key` saves it).");
}

export const login: Command = {
  name: "login",
  summary: "Sign in: save an API key, or sign in with the browser",
  usage: "svc login --api-key [-] [--base-url URL]\n       svc login [--base-url URL] [--no-browser]",
  description: [
    "With --api-key, prompts for the key without echo (or reads it from standard input with `-`),",
    "checks it with GET /v1/models, and only then saves it, replacing the settings file atomically;",
    "a refused key leaves the saved credentials unchanged.",
    "",
    "Without --api-key, signs in with the browser (authorization code + PKCE, answered on a",
    "127.0.0.1 listener) at the deployment's identity provider, and saves the session. The sign-in",
    "address is always printed; a browser is opened where one exists. It creates no API key (`svc keys",
    "create NAME` does, with this sign-in).",
    "",
    "The deployment is --base-url, else SVC_BASE_URL, else the saved one (https, or http on",
    "loopback). The file is SVC_CONFIG_PATH, default ~/.svc/config.json (mode 0600).",
  ].join("\n"),
  options: {
    "api-key": { type: "boolean", help: "sign in with an API key (prompted for; `-` reads it from standard input)" },
    "base-url": { type: "string", value: "URL", help: "the deployment's address, without /v1/..." },
    "no-browser": { type: "boolean", help: "browser sign-in: only print the address, do not open a browser" },
  },
  positionals: { min: 0, max: 1 },
  async run(ctx, { values, positionals }) {
    const withKey = values["api-key"] === true;
    if (positionals.length > 0 && (positionals[0] !== "-" || !withKey)) {
      throw new UsageError(
        withKey
          ? "--api-key takes no key on the command line (it would stay in the shell's history): type it at the prompt, or pipe it in with `-`"
          : "svc login takes no arguments (did you mean `svc login --api-key -`?)",
      );
    }
    const path = configPath(ctx.env);
    const saved = readSaved(path);
    const baseUrl = loginBaseUrl(ctx, values["base-url"] as string | undefined, saved);
    if (withKey) await loginWithKey(ctx, baseUrl, positionals[0] === "-", saved, path);
    else await loginWithBrowser(ctx, baseUrl, values["no-browser"] !== true, saved, path);
  },
};

export const logout: Command = {
  name: "logout",
  summary: "Forget the saved API key and browser session",
  usage: "svc logout",
  description: "Removes the API key and the session from the settings file (SVC_CONFIG_PATH, default ~/.svc/config.json).\nThe key itself is not revoked: it stays valid until it is revoked in key management.",
  async run(ctx) {
    const path = configPath(ctx.env);
    let removed: { apiKey: boolean; session: boolean };
    try {
      removed = forgetSaved(path);
    } catch (err) {
      if (!(err instanceof SettingsError)) throw err;
      // An unreadable file cannot be edited; removing it is what logging out of it means.
      rmSync(path, { force: true });
      ctx.status(`Removed the unreadable settings file ${path}.`);
      return;
    }
    const what = [removed.apiKey && "API key", removed.session && "browser session"].filter(Boolean).join(" and ");
    ctx.status(what ? `Removed the saved ${what} from ${path}. The key was not revoked.` : `Nothing to remove: no key or session is saved in ${path}.`);
    if (ctx.env.SVC_API_KEY) ctx.status("Note: SVC_API_KEY is still set in this environment; commands keep using it.");
  },
};
