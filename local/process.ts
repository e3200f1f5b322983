/**
 * Child processes of the local stack (runs on a developer machine or in tests, never in production).
 * Each child's output goes to its own log file; `start` resolves once a readiness check passes, and
 * rejects with the log's tail if the child exits first or the check times out.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

export interface Child {
  name: string;
  proc: ChildProcess;
  logPath: string;
  stop(): Promise<void>;
  /** SIGKILL to the child's whole process group, as a crash would end it; resolves once it has exited. */
  kill(): Promise<void>;
}

export interface StartOptions {
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string | undefined>;
  cwd?: string;
  logPath: string;
  /** Resolves true when the child is ready; polled every 100 ms. */
  ready: () => Promise<boolean>;
  timeoutMs?: number;
}

export function logTail(path: string, lines = 30): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

export async function start(opts: StartOptions): Promise<Child> {
  const fd = openSync(opts.logPath, "a");
  const proc = spawn(opts.command, opts.args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  closeSync(fd);
  let exited: string | undefined;
  const exit = new Promise<void>((resolve) => {
    proc.once("exit", (code, signal) => {
      exited = `exited with ${signal ?? code}`;
      resolve();
    });
    proc.once("error", (err) => {
      exited = `failed to start: ${err.message}`;
      resolve();
    });
  });
  const child: Child = {
    name: opts.name,
    proc,
    logPath: opts.logPath,
    async kill() {
      if (exited || proc.pid === undefined) return;
      try {
        process.kill(-proc.pid, "SIGKILL");
      } catch {
        return;
      }
      await exit;
    },
    async stop() {
      if (exited || proc.pid === undefined) return;
      try {
        process.kill(-proc.pid, "SIGTERM");
      } catch {
        return;
      }
      const killer = setTimeout(() => {
        try {
          if (proc.pid !== undefined) process.kill(-proc.pid, "SIGKILL");
        } catch {
          /* already gone */
        }
      }, 5000);
      await exit;
      clearTimeout(killer);
    },
  };
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    if (exited) throw new Error(`${opts.name} ${exited}; log ${opts.logPath}:\n${logTail(opts.logPath)}`);
    if (await opts.ready().catch(() => false)) return child;
    if (Date.now() > deadline) {
      await child.stop();
      throw new Error(`${opts.name} not ready after ${opts.timeoutMs ?? 60_000} ms; log ${opts.logPath}:\n${logTail(opts.logPath)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
