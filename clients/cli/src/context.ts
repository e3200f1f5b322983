/**
 * What a `svc` command runs with (runs in a user's terminal): its streams, the environment, the
 * signal that Ctrl-C aborts, the settings, and an SDK client made from them: with the API key, or for
 * training, key and webhook management with the signed-in user's access token (the session `svc
 * login` saved, or SVC_ACCESS_TOKEN).
 *
 *     const client = ctx.client({ timeout: 10_000 });
 *     const { models } = await client.models.list({ signal: ctx.signal });
 *     const trainings = await ctx.trainingClient().trainings.list({}, { signal: ctx.signal });
 */
import type { ReadStream } from "node:tty";
import { Client, requireCredentials, requireSession, resolveSession, resolveSettings, type ClientOptions, type Env, type Settings } from "./sdk.ts";

export interface Context {
  env: Env;
  stdin: NodeJS.ReadableStream & Partial<Pick<ReadStream, "isTTY" | "setRawMode">>;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  /** Aborted by Ctrl-C (SIGINT); pass it to every request. */
  signal: AbortSignal;
  /** The settings (read once); throws ConfigurationError for a bad variable or saved file. */
  settings(): Settings;
  /** A client with the settings' key and base URL; throws SettingsError when either is missing. */
  client(options?: Pick<ClientOptions, "timeout" | "fetch">): Client;
  /**
   * A client with the signed-in user's access token and its deployment, for training; throws
   * SettingsError (exit 2) telling to run `svc login` when there is none, or it has expired.
   */
  trainingClient(options?: Pick<ClientOptions, "timeout" | "fetch">): Client;
  /**
   * A client with the same access token and deployment, for key management (`svc keys`); the same
   * SettingsError, naming key management, when there is none.
   */
  keysClient(options?: Pick<ClientOptions, "timeout" | "fetch">): Client;
  /** The same, for webhook endpoints (`svc webhooks`); the SettingsError names webhook management. */
  webhooksClient(options?: Pick<ClientOptions, "timeout" | "fetch">): Client;
  /** One line of status on standard error. */
  status(line: string): void;
}

export function createContext(io: Pick<Context, "env" | "stdin" | "stdout" | "stderr" | "signal">): Context {
  let settings: Settings | undefined;
  const sessionClient = (purpose: string, options: Pick<ClientOptions, "timeout" | "fetch">) => {
    const { accessToken, baseUrl } = requireSession(resolveSession(io.env), Date.now(), purpose);
    return new Client({ accessToken, baseURL: baseUrl, ...options });
  };
  const ctx: Context = {
    ...io,
    settings: () => (settings ??= resolveSettings(io.env)),
    client(options = {}) {
      const current = ctx.settings();
      const { apiKey, baseUrl } = requireCredentials(current);
      return new Client({ apiKey, baseURL: baseUrl, defaultModel: current.defaultModel, ...options });
    },
    trainingClient: (options = {}) => sessionClient("training", options),
    keysClient: (options = {}) => sessionClient("key management", options),
    webhooksClient: (options = {}) => sessionClient("webhook management", options),
    status: (line) => void io.stderr.write(`${line}\n`),
  };
  return ctx;
}
