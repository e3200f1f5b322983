/**
 * Python virtual environments for tests that drive a Python tool (runs only in tests): a venv under
 * .local/<name>, made once and reused, whose pinned requirements are installed again only when the
 * requirements file changes; and a command run to its end with its output.
 *
 *     const venv = await pythonVenv("fuzz-venv", join(ROOT, "test", "fuzz", "requirements.txt"));
 *     const { code, output } = await runTool(venv.bin("schemathesis"), ["run", url], { cwd: ROOT, env });
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dirname, "..", "..");

export interface ToolRun {
  code: number | null;
  output: string;
}

export interface Venv {
  dir: string;
  bin(name: string): string;
}

/** Runs a command to its end, stdout and stderr together; never throws for a failing exit. */
export function runTool(command: string, args: string[], options: { cwd: string; env?: Record<string, string>; timeoutMs?: number }): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" } });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGTERM"), options.timeoutMs ?? 300_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Runs a command that must succeed; throws with its output otherwise. */
export async function must(command: string, args: string[], cwd = ROOT): Promise<string> {
  const result = await runTool(command, args, { cwd });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${result.code}:\n${result.output}`);
  return result.output;
}

/** A Python of at least 3.11 on the PATH, the first of `candidates` that is there. */
export async function python(candidates = ["python3.11", "python3.12", "python3.13", "python3"]): Promise<string> {
  for (const candidate of candidates) {
    const probe = await runTool(candidate, ["-c", "import sys; print(sys.version_info >= (3, 11))"], { cwd: ROOT }).catch(() => null);
    if (probe?.code === 0 && probe.output.trim() === "True") return candidate;
  }
  throw new Error(`these tests need Python 3.11 or later on the PATH (one of ${candidates.join(", ")})`);
}

/**
 * The venv .local/<name>, made once and reused: the pinned packages of `requirements` are installed
 * again only when that file changes (its digest is kept in the venv, in the file `marker`). With
 * `pythons`, the venv is made with the first of them on the PATH, and made anew when that changes.
 */
export async function pythonVenv(name: string, requirements: string, options: { marker?: string; pythons?: string[] } = {}): Promise<Venv> {
  const dir = join(ROOT, ".local", name);
  const bin = (tool: string) => join(dir, "bin", tool);
  const interpreter = options.pythons ? await python(options.pythons) : undefined;
  const hash = createHash("sha256").update(readFileSync(requirements));
  if (interpreter) hash.update(`\n${(await must(interpreter, ["-c", "import sys; print(sys.version)"])).trim()}`);
  const digest = hash.digest("hex");
  const markerPath = join(dir, options.marker ?? "requirements.sha256");
  const current = existsSync(markerPath) && readFileSync(markerPath, "utf8") === digest;
  if (!current && interpreter) rmSync(dir, { recursive: true, force: true });
  if (!existsSync(bin("python"))) await must(interpreter ?? (await python()), ["-m", "venv", dir]);
  if (!current) {
    await must(bin("python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", requirements]);
    writeFileSync(markerPath, digest);
  }
  return { dir, bin };
}
