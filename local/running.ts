/**
 * Finds the stack that `npm start` is running, for the local commands (operator tools, token
 * printing) and for refusing a second `npm start`. Runs on a developer machine only.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export interface RunningStack {
  pid: number;
  baseUrl: string;
  databaseUrl: string;
  /** The local runtime's secret under its registry `token_env` name (the lock file is private to the user). */
  runtimeSecrets?: Record<string, string>;
}

export function stackDir(): string {
  return resolve(process.env.SVC_STACK_DIR ?? join(import.meta.dirname, "../.local/stack"));
}

/** The running stack, or null when none runs (a lock left by a killed launcher is ignored). */
export function runningStack(): RunningStack | null {
  const lockPath = join(stackDir(), "stack.json");
  if (!existsSync(lockPath)) return null;
  try {
    const lock = JSON.parse(readFileSync(lockPath, "utf8")) as RunningStack;
    process.kill(lock.pid, 0);
    return lock;
  } catch {
    return null;
  }
}
