/**
 * A user's machine for package tests: an environment with Node and npm on the PATH and no Bun (the
 * repository's `node_modules/.bin`, which holds Bun, and any folder with a `bun` in it are left
 * out), and helpers that run commands in it and fail with their output.
 */
import { spawnSync, type SpawnSyncOptions } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";

/** PATH without Bun, HOME (npm's cache), and `extra`; nothing else of the test runner's environment. */
export function plainNodeEnv(extra: Record<string, string> = {}): Record<string, string> {
  const path = (process.env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => dir !== "" && !dir.includes("node_modules") && !existsSync(join(dir, "bun")))
    .join(delimiter);
  return { PATH: path, HOME: process.env.HOME ?? "/tmp", ...extra };
}

/** Runs `command` with `args`, returning its stdout; throws with both outputs when it fails. */
export function run(command: string, args: string[], options: SpawnSyncOptions & { env: Record<string, string> }): string {
  const result = spawnSync(command, args, { encoding: "utf8", timeout: 180_000, ...options });
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${result.status ?? result.signal}:\n${String(result.stdout)}\n${String(result.stderr)}`);
  }
  return String(result.stdout);
}
