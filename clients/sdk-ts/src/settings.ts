/**
 * The svc tools' settings: which key and which deployment the `svc` CLI and the MCP server use, and
 * the saved-credentials file `svc login` writes (Node 20 or later, like the SDK). `new Client()` never
 * reads that file; a program that wants the key `svc login` saved asks for it here:
 *
 *     import { Client } from "@decision-service/sdk";
 *     import { requireCredentials, resolveSettings } from "@decision-service/sdk/settings";
 *     const settings = resolveSettings(process.env);
 *     const { apiKey, baseUrl } = requireCredentials(settings);
 *     const client = new Client({ apiKey, baseURL: baseUrl, defaultModel: settings.defaultModel });
 *
 *     SVC_API_KEY        an API key; when set, the environment alone names the credentials
 *     SVC_ACCESS_TOKEN   a signed-in user's access token, for training (instead of the session
 *                        `svc login` saved); when set, it goes only to SVC_BASE_URL
 *     SVC_BASE_URL       the deployment's address, without /v1/... (the service publishes no default
 *                        address, so it comes from here, the saved file or `svc login --base-url`)
 *     SVC_DEFAULT_MODEL  the model when a command names none; default svc-shared
 *     SVC_CONFIG_PATH    the saved-credentials file; default ~/.svc/config.json
 *
 * Precedence (the specification's Authentication, point 9): with SVC_API_KEY set, the key and the
 * base URL come from the environment (SVC_BASE_URL), so an environment key is never
 * sent to a host that was saved for another key. Otherwise the saved key and URL are used, with
 * SVC_BASE_URL overriding the saved URL.
 *
 * Training takes the other credential, the signed-in user's access token, resolved the same way on
 * its own (resolveSession): SVC_ACCESS_TOKEN with SVC_BASE_URL, else the session `svc login` saved
 * with the saved URL, SVC_BASE_URL overriding it:
 *
 *     const { accessToken, baseUrl } = requireSession(resolveSession(process.env));
 *     const trainer = new Client({ accessToken, baseURL: baseUrl });
 *
 * The file is JSON, mode 0600 in a 0700 folder, replaced atomically (a temporary file beside it,
 * then a rename), so a failed or interrupted write leaves the previous credentials as they were:
 *
 *     { "base_url": "https://...", "api_key": "svc_...", "session": { "issuer": ..., "access_token": ... } }
 */
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";
import { SHARED_ALIAS } from "../../../contract/limits.ts";
import { normalizeBaseUrl } from "./base-url.ts";
import { ConfigurationError } from "./errors.ts";

export { normalizeBaseUrl };

/**
 * The saved file is unusable, or a credential is missing; a bad address is a ConfigurationError, of
 * which this is a kind. Messages name the setting or the path, never a secret.
 */
export class SettingsError extends ConfigurationError {
  override name = "SettingsError";
}

/** A browser sign-in (`svc login`): the identity provider's tokens for the key-management routes. */
export const Session = z.looseObject({
  issuer: z.string(),
  client_id: z.string(),
  access_token: z.string(),
  refresh_token: z.string().optional(),
  /** ISO time the access token expires. */
  expires_at: z.string(),
  /** Who signed in (the token's subject), for display. */
  subject: z.string().optional(),
});
export type Session = z.infer<typeof Session>;

/** The saved file. Unknown fields are kept, so an older tool does not drop what a newer one wrote. */
export const SavedSettings = z.looseObject({
  base_url: z.string().optional(),
  api_key: z.string().optional(),
  session: Session.optional(),
});
export type SavedSettings = z.infer<typeof SavedSettings>;

export type Env = Record<string, string | undefined>;

export interface Settings {
  /** The API key to send; undefined when there is none (not signed in). */
  apiKey: string | undefined;
  /** The deployment; undefined when nothing names one. */
  baseUrl: string | undefined;
  defaultModel: string;
  configPath: string;
  /** Where the key came from. */
  source: "environment" | "saved" | "none";
}

/** A variable that is set and not empty. */
const set = (value: string | undefined) => (value === undefined || value === "" ? undefined : value);

export function configPath(env: Env): string {
  return set(env.SVC_CONFIG_PATH) ?? join(homedir(), ".svc", "config.json");
}

/** The saved file, or an empty one when there is none. */
export function readSaved(path: string): SavedSettings {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new SettingsError(`cannot read the saved settings ${path}: ${(err as NodeJS.ErrnoException).code ?? "read failed"}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new SettingsError(`the saved settings ${path} are not valid JSON; fix or remove the file (svc logout removes it)`);
  }
  const parsed = SavedSettings.safeParse(json);
  if (!parsed.success) throw new SettingsError(`the saved settings ${path} do not have the expected shape; fix or remove the file (svc logout removes it)`);
  return parsed.data;
}

/**
 * Replaces the saved file atomically: the new content goes to a temporary file (mode 0600) in the
 * same folder, is flushed, and is renamed over the old one. A folder that has to be created gets
 * mode 0700; the default folder (~/.svc) is tightened to 0700 too.
 */
export function writeSaved(path: string, settings: SavedSettings): void {
  const dir = dirname(path);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (dir === join(homedir(), ".svc")) chmodSync(dir, 0o700);
  } catch (err) {
    throw new SettingsError(`cannot create the folder ${dir}: ${(err as NodeJS.ErrnoException).code ?? "failed"}`);
  }
  const tmp = join(dir, `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    const fd = openSync(tmp, "wx", 0o600);
    try {
      writeSync(fd, `${JSON.stringify(settings, null, 2)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    // The mode given to open is reduced by the umask; the file must be 0600 whatever it is.
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new SettingsError(`cannot save the settings to ${path}: ${(err as NodeJS.ErrnoException).code ?? "write failed"}`);
  }
}

/**
 * Removes the saved key and session; the saved base URL stays, so the next login goes to the same
 * deployment. Returns what was removed.
 */
export function forgetSaved(path: string): { apiKey: boolean; session: boolean } {
  const saved = readSaved(path);
  const removed = { apiKey: saved.api_key !== undefined, session: saved.session !== undefined };
  if (removed.apiKey || removed.session) {
    const { api_key: _key, session: _session, ...rest } = saved;
    writeSaved(path, rest);
  }
  return removed;
}

/**
 * The settings a command runs with. Throws ConfigurationError for a bad SVC_BASE_URL or saved URL,
 * SettingsError for an unreadable saved file (the file is not read at all when SVC_API_KEY is set).
 */
export function resolveSettings(env: Env): Settings {
  const path = configPath(env);
  const defaultModel = set(env.SVC_DEFAULT_MODEL) ?? SHARED_ALIAS;
  const envUrl = set(env.SVC_BASE_URL);
  const envKey = set(env.SVC_API_KEY);
  if (envKey !== undefined) {
    const baseUrl = envUrl === undefined ? undefined : normalizeBaseUrl(envUrl, "SVC_BASE_URL");
    return { apiKey: envKey, baseUrl, defaultModel, configPath: path, source: "environment" };
  }
  const saved = readSaved(path);
  let baseUrl: string | undefined;
  if (envUrl !== undefined) baseUrl = normalizeBaseUrl(envUrl, "SVC_BASE_URL");
  else if (saved.base_url !== undefined) baseUrl = normalizeBaseUrl(saved.base_url, `the base_url saved in ${path}:`);
  return { apiKey: saved.api_key, baseUrl, defaultModel, configPath: path, source: saved.api_key === undefined ? "none" : "saved" };
}

/** What to tell someone who has no key yet. */
export const SIGN_IN_HINT =
  "no API key is configured: save one with `svc login --api-key --base-url URL` (it prompts for the key; `svc login --api-key -` reads it from standard input), or set SVC_API_KEY and SVC_BASE_URL";

/** What to tell someone whose key has no deployment to go to. */
export const BASE_URL_HINT = "no base URL is configured: set SVC_BASE_URL to the service's address (without /v1/...), or save one with `svc login --api-key --base-url URL`";

/** The key and the deployment, or a SettingsError that says how to provide the one missing. */
export function requireCredentials(settings: Settings): { apiKey: string; baseUrl: string } {
  if (settings.apiKey === undefined) throw new SettingsError(SIGN_IN_HINT);
  if (settings.baseUrl === undefined) throw new SettingsError(BASE_URL_HINT);
  return { apiKey: settings.apiKey, baseUrl: settings.baseUrl };
}

/** The signed-in user's access token that training and key management take, and where it goes. */
export interface SessionSettings {
  /** The token to send; undefined when nobody is signed in. */
  accessToken: string | undefined;
  /** The deployment; undefined when nothing names one. */
  baseUrl: string | undefined;
  /** ISO time the saved session's token expires; undefined for SVC_ACCESS_TOKEN (its issuer knows). */
  expiresAt: string | undefined;
  configPath: string;
  /** Where the token came from. */
  source: "environment" | "saved" | "none";
}

/**
 * The access token training and key-management commands run with. With SVC_ACCESS_TOKEN set, the environment alone
 * names it and the address (an environment token is never sent to a saved address); otherwise the
 * session `svc login` saved, and the saved URL with SVC_BASE_URL overriding it. SVC_API_KEY plays no
 * part: the two credentials are resolved apart, each with its own deployment.
 */
export function resolveSession(env: Env): SessionSettings {
  const path = configPath(env);
  const envUrl = set(env.SVC_BASE_URL);
  const envToken = set(env.SVC_ACCESS_TOKEN);
  if (envToken !== undefined) {
    const baseUrl = envUrl === undefined ? undefined : normalizeBaseUrl(envUrl, "SVC_BASE_URL");
    return { accessToken: envToken, baseUrl, expiresAt: undefined, configPath: path, source: "environment" };
  }
  const saved = readSaved(path);
  let baseUrl: string | undefined;
  if (envUrl !== undefined) baseUrl = normalizeBaseUrl(envUrl, "SVC_BASE_URL");
  else if (saved.base_url !== undefined) baseUrl = normalizeBaseUrl(saved.base_url, `the base_url saved in ${path}:`);
  const session = saved.session;
  return { accessToken: session?.access_token, baseUrl, expiresAt: session?.expires_at, configPath: path, source: session === undefined ? "none" : "saved" };
}

/** What to tell someone who is not signed in for `purpose` (what takes the sign-in: `training`, `key management`). */
export const sessionHint = (purpose: string): string =>
  `not signed in: ${purpose} takes your browser sign-in, not an API key; run \`svc login --base-url URL\` (or set SVC_ACCESS_TOKEN to a user access token, with SVC_BASE_URL)`;

/** What to tell someone who is not signed in for training. */
export const SESSION_HINT = sessionHint("training");

/**
 * The access token and the deployment, or a SettingsError that says how to sign in: when nobody is
 * (naming `purpose`, what needs the sign-in), when the saved session has expired (this module does
 * not refresh it), or when no address is known.
 */
export function requireSession(session: SessionSettings, now = Date.now(), purpose = "training"): { accessToken: string; baseUrl: string } {
  if (session.accessToken === undefined) throw new SettingsError(sessionHint(purpose));
  const expires = session.expiresAt === undefined ? Number.NaN : Date.parse(session.expiresAt);
  if (session.source === "saved" && expires <= now) {
    throw new SettingsError(`the browser sign-in saved in ${session.configPath} expired at ${session.expiresAt}: run \`svc login\` again`);
  }
  if (session.baseUrl === undefined) {
    throw new SettingsError(
      session.source === "environment"
        ? "SVC_ACCESS_TOKEN is set but SVC_BASE_URL is not: an environment token goes only to the address the environment names"
        : BASE_URL_HINT,
    );
  }
  return { accessToken: session.accessToken, baseUrl: session.baseUrl };
}
