/**
 * Runs the built `svc` and `svc-mcp` as real processes for tests (runs only in tests): with a clean
 * environment (a temporary HOME, no SVC_* variable of the test runner), optionally under a real
 * pseudo-terminal (`script` from util-linux), with their exit code, output and signals.
 *
 *     buildClients();                                      // node clients/build.mjs cli mcp
 *     const r = await svc(["models", "--json"], { env: { SVC_API_KEY: key, SVC_BASE_URL: url } });
 *     r.code; r.stdout; r.stderr;
 */
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";

export const ROOT = join(import.meta.dirname, "..", "..");
export const SVC = join(ROOT, "clients", "cli", "dist", "svc.js");
export const SVC_MCP = join(ROOT, "clients", "mcp", "dist", "svc-mcp.js");

/** Bundles both packages with the repository's build script, as `npm pack` does. */
export function buildClients(): void {
  execFileSync(process.execPath, [join(ROOT, "clients", "build.mjs"), "cli", "mcp"], { cwd: ROOT, stdio: "pipe" });
}

/** The environment of a user's shell: PATH, HOME, and what the test names; no SVC_* of the runner. */
export function userEnv(home: string, vars: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8" };
  for (const [name, value] of Object.entries(vars)) if (value !== undefined) env[name] = value;
  return env;
}

export interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Running {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves when `pattern` has appeared on the stream (stderr by default); rejects after `ms`. */
  waitFor(pattern: RegExp, stream?: "stdout" | "stderr", ms?: number): Promise<RegExpMatchArray>;
  exit: Promise<Outcome>;
}

/** Starts `node svc.js ...args` (or another script) and collects its output. */
export function start(args: string[], opts: { env: Record<string, string>; cwd?: string; script?: string }): Running {
  const child = spawn(process.execPath, [opts.script ?? SVC, ...args], { env: opts.env, cwd: opts.cwd ?? ROOT });
  const out = { stdout: "", stderr: "" };
  const waiters: Array<() => void> = [];
  const collect = (stream: "stdout" | "stderr") => (chunk: Buffer) => {
    out[stream] += chunk.toString("utf8");
    for (const wake of waiters.splice(0)) wake();
  };
  child.stdout.on("data", collect("stdout"));
  child.stderr.on("data", collect("stderr"));
  const exit = new Promise<Outcome>((resolve) => child.on("close", (code, signal) => resolve({ code, signal, ...out })));
  return {
    child,
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    waitFor(pattern, stream = "stderr", ms = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${pattern} on ${stream} within ${ms} ms; stdout: ${out.stdout}\nstderr: ${out.stderr}`)), ms);
        const check = () => {
          const match = out[stream].match(pattern);
          if (match) {
            clearTimeout(timer);
            resolve(match);
          } else {
            waiters.push(check);
          }
        };
        check();
        void exit.then(() => setTimeout(check, 0));
      });
    },
    exit,
  };
}

/** Runs `svc ...args` to its end, with `input` on standard input (closed at once when absent). */
export async function svc(args: string[], opts: { env: Record<string, string>; input?: string | Buffer; cwd?: string }): Promise<Outcome> {
  const running = start(args, opts);
  running.child.stdin.end(opts.input);
  return running.exit;
}

/**
 * Runs `command` under a real pseudo-terminal (`script -qec`), so that its standard input, output
 * and error are a terminal. `typed` is sent, key by key as a terminal would pass it, once `prompt`
 * has appeared; the transcript is everything the terminal showed (echo included).
 */
export async function inTerminal(
  command: string,
  opts: { env: Record<string, string>; prompt?: RegExp; typed?: string; ms?: number; onOutput?: (transcript: string) => void },
): Promise<{ code: number | null; transcript: string }> {
  const child = spawn("script", ["-qec", command, "/dev/null"], { env: { TERM: "xterm", ...opts.env }, cwd: ROOT });
  let transcript = "";
  let typed = false;
  const ms = opts.ms ?? 60_000;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the terminal session did not end within ${ms} ms: ${transcript}`));
    }, ms);
    const onData = (chunk: Buffer) => {
      transcript += chunk.toString("utf8");
      opts.onOutput?.(transcript);
      if (!typed && opts.typed !== undefined && opts.prompt?.test(transcript)) {
        typed = true;
        child.stdin.write(opts.typed);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, transcript });
    });
  });
}

/** A word as a POSIX shell reads it literally. */
export const shellQuote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;
