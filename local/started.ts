/**
 * What a local stack has started (runs on a developer machine or in tests, never in production).
 * Each piece is registered as soon as it runs, so that a step that fails, or the stack's `stop`, ends
 * every piece started so far, newest first. The runtime and the sidecar come as handles that start
 * them again at the same address (crash tests), keeping `children` current.
 *
 *     const started = nothingStarted();
 *     const runtime = await startRestartableRuntime(started, { name: "runtime", modelPath, secret, logDir });
 *     await runtime.child.kill();
 *     await runtime.restore();
 *     await started.stop();
 */
import { Identity } from "../server-shared/runtime-protocol.ts";
import type { Child } from "./process.ts";
import { startRuntime, startSidecar } from "./tiers.ts";

export interface Started {
  /** The child processes, oldest first (the stack's `children`). */
  children: Child[];
  /** A child process and the way to stop its piece. */
  add(child: Child, stop: () => Promise<void>): void;
  /** A piece with no child process of ours to list (Postgres, Redis). */
  onStop(stop: () => Promise<void>): void;
  /** Puts a restarted child where the one it replaces was listed. */
  replace(old: Child, restarted: Child): void;
  /** Stops every piece, newest first; one that fails to stop does not keep the others running. */
  stop(): Promise<void>;
}

export function nothingStarted(): Started {
  const children: Child[] = [];
  const stoppers: Array<() => Promise<void>> = [];
  return {
    children,
    add: (child, stop) => {
      children.push(child);
      stoppers.push(stop);
    },
    onStop: (stop) => {
      stoppers.push(stop);
    },
    replace: (old, restarted) => {
      children.splice(children.indexOf(old), 1, restarted);
    },
    stop: async () => {
      for (const stopOne of stoppers.reverse()) await stopOne().catch(() => {});
      stoppers.length = 0;
    },
  };
}

/**
 * Starts services in parallel and registers every one that started with `started`, even when
 * another failed, so that a failed start leaves nothing running.
 */
export async function startAll<T extends readonly Promise<{ stop(): Promise<void> }>[]>(
  started: Started,
  starting: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(starting);
  for (const result of results) if (result.status === "fulfilled") started.onStop(result.value.stop);
  const failed = results.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** A runtime and the identity it reported when it started. */
export interface RestartableRuntime {
  /** The same across restarts: a restart keeps the port the registry names. */
  url: string;
  /** The process now running; `restore` replaces it. */
  readonly child: Child;
  release: Identity;
  /** Starts the runtime again at the same address, with more settings when given. */
  restore(env?: Record<string, string>): Promise<void>;
}

export async function startRestartableRuntime(started: Started, options: Parameters<typeof startRuntime>[0]): Promise<RestartableRuntime> {
  let current = await startRuntime(options);
  started.add(current.child, () => current.child.stop());
  const res = await fetch(`${current.url}/v1/identity`, { headers: { authorization: `Bearer ${options.secret}` } });
  const release = Identity.parse(await res.json());
  return {
    url: current.url,
    get child() {
      return current.child;
    },
    release,
    restore: async (env) => {
      // The same log: readiness reads only what the new process writes.
      const restarted = await startRuntime({ ...options, env: { ...options.env, ...env }, port: Number(new URL(current.url).port) });
      started.replace(current.child, restarted.child);
      current = restarted;
    },
  };
}

/** A sidecar at a fixed address. */
export interface RestartableSidecar {
  url: string;
  /** The process now running; `restart` replaces it. */
  readonly child: Child;
  /** Ends the sidecar with `signal` (SIGKILL: a crash) and starts it again; `env` goes on top of the first one's `extraEnv`. */
  restart(signal: "SIGKILL" | "SIGTERM", env?: Record<string, string>): Promise<void>;
}

export async function startRestartableSidecar(started: Started, options: Parameters<typeof startSidecar>[0]): Promise<RestartableSidecar> {
  let current = await startSidecar(options);
  started.add(current, () => current.stop());
  return {
    url: options.address.url,
    get child() {
      return current;
    },
    restart: async (signal, env) => {
      if (signal === "SIGKILL") await current.kill();
      else await current.stop();
      const restarted = await startSidecar({ ...options, extraEnv: { ...options.extraEnv, ...env } });
      started.replace(current, restarted);
      current = restarted;
    },
  };
}
