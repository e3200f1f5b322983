/**
 * Child processes of the local stack (runs on a developer machine or in tests, never in production).
 * Each child's output goes to its own log file, kept across runs (each run's part begins with a
 * `---- <name> started <time> ----` line); `start` resolves once a readiness check passes on what
 * this run wrote, and rejects with the log's tail if the child exits first or the check times out.
 *
 * A child runs in a process group of its own and outlives a launcher killed with SIGKILL. So that
 * the next run finds its ports free, each child's pid and start time are kept beside its log
 * (`<log>.pid`, removed when it exits): `start` first stops the process its pid file still names, and
 * `stopLeftovers` stops every one under a stack's folder before the launcher checks its ports.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

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
  /**
   * Resolves true when the child is ready; polled every 100 ms. `output()` is what the child has
   * written to its log in this run (an earlier run's lines in the same file are not its).
   */
  ready: (output: () => Promise<string>) => Promise<boolean>;
  timeoutMs?: number;
}

export function logTail(path: string, lines = 30): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** The JSON after `prefix` on the first line of `output` that starts with it (a READY line); undefined while there is none. */
export function announced<T>(output: string, prefix: string): T | undefined {
  const line = output.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : (JSON.parse(line.slice(prefix.length)) as T);
}

export async function start(opts: StartOptions): Promise<Child> {
  const pidPath = `${opts.logPath}.pid`;
  await stopLeftover(pidPath);
  appendFileSync(opts.logPath, `---- ${opts.name} started ${new Date().toISOString()} ----\n`);
  const offset = statSync(opts.logPath).size;
  const output = async () => (await readFile(opts.logPath)).subarray(offset).toString("utf8");
  const fd = openSync(opts.logPath, "a");
  const proc = spawn(opts.command, opts.args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  closeSync(fd);
  const identity = proc.pid === undefined ? null : processIdentity(proc.pid);
  if (identity) writeFileSync(pidPath, JSON.stringify(identity));
  let exited: string | undefined;
  const exit = new Promise<void>((resolve) => {
    proc.once("exit", (code, signal) => {
      exited = `exited with ${signal ?? code}`;
      forget(pidPath, identity);
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
    if (await opts.ready(output).catch(() => false)) return child;
    if (Date.now() > deadline) {
      await child.stop();
      throw new Error(`${opts.name} not ready after ${opts.timeoutMs ?? 60_000} ms; log ${opts.logPath}:\n${logTail(opts.logPath)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A process as /proc tells it apart from a later one given the same pid: its pid and start time (clock ticks after boot). */
interface ProcessIdentity {
  pid: number;
  start: string;
}

function processIdentity(pid: number): ProcessIdentity | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Field 3 is the state; field 22 the start time. A zombie has ended.
    if (fields[0] === "Z") return null;
    return { pid, start: fields[19]! };
  } catch {
    return null; // gone, or no /proc (then nothing is recorded, and nothing stopped later)
  }
}

/** Removes a pid file that still names `identity` (a later start may have written its own). */
function forget(pidPath: string, identity: ProcessIdentity | null): void {
  try {
    if (identity && readFileSync(pidPath, "utf8") === JSON.stringify(identity)) rmSync(pidPath, { force: true });
  } catch {
    /* already gone */
  }
}

/**
 * Stops the process group a pid file names when that very process still runs (same pid and start
 * time: a pid reused by another program is left alone): SIGTERM, then SIGKILL after 5 s. Returns
 * whether it stopped one. The pid file is removed either way.
 */
export async function stopLeftover(pidPath: string): Promise<boolean> {
  if (!existsSync(pidPath)) return false;
  let recorded: ProcessIdentity | null = null;
  try {
    recorded = JSON.parse(readFileSync(pidPath, "utf8")) as ProcessIdentity;
  } catch {
    /* unreadable: nothing to stop */
  }
  rmSync(pidPath, { force: true });
  const same = () => recorded !== null && processIdentity(recorded.pid)?.start === recorded.start;
  if (!same()) return false;
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-recorded!.pid, name);
    } catch {
      /* the group has ended */
    }
  };
  signal("SIGTERM");
  // Until every process of the group has ended, not only its leader: the edge's workerd is its
  // launcher's child and holds the port a moment longer.
  for (let waited = 0; groupAlive(recorded!.pid); waited += 100) {
    if (waited === 5000) signal("SIGKILL");
    if (waited === 10_000) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** Whether a process of group `pgid` still runs (a zombie has ended; /proc field 5 is the group). */
function groupAlive(pgid: number): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z" && Number(fields[2]) === pgid) return true;
    } catch {
      /* ended while we looked */
    }
  }
  return false;
}

/**
 * Stops what an earlier run under `dataDir` left running (its launcher killed with SIGKILL): every
 * process a `<log>.pid` file there names, at most two folders down. Returns the logs of those stopped.
 */
export async function stopLeftovers(dataDir: string): Promise<string[]> {
  const pidFiles = (dir: string, depth: number): string[] =>
    (existsSync(dir) ? readdirSync(dir, { withFileTypes: true }) : []).flatMap((entry) =>
      entry.isDirectory() && depth > 0 ? pidFiles(join(dir, entry.name), depth - 1) : entry.isFile() && entry.name.endsWith(".log.pid") ? [join(dir, entry.name)] : [],
    );
  const stopped: string[] = [];
  for (const path of pidFiles(dataDir, 2)) if (await stopLeftover(path)) stopped.push(path.slice(0, -".pid".length));
  return stopped;
}
