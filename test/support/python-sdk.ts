/**
 * Helpers for the Python SDK's test (runs only in tests): a virtual environment under
 * .local/python-sdk-venv with the package and its pinned tools installed, a command run in it, and
 * the contract's JSON Schemas and constants dumped for the SDK's model check.
 *
 *     const venv = await pythonSdkVenv();
 *     const { code, output } = await runTool(venv.bin("pytest"), ["-q"], { cwd: PYTHON_SDK_DIR, env });
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { BATCH_LIST_PAGE, BATCH_STATUSES, Batch, BatchList, ResultRecord, ResultsPage, TERMINAL_STATUSES } from "../../contract/batches.ts";
import { ChoiceAnswer, DecisionResponse, NoulAnswer, ScoreAnswer, Usage } from "../../contract/decision.ts";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { LIMITS, REQUEST_ID_HEADER, SHARED_ALIAS } from "../../contract/limits.ts";
import { ModelItem, ModelList } from "../../contract/models.ts";

const ROOT = join(import.meta.dirname, "..", "..");
export const PYTHON_SDK_DIR = join(ROOT, "clients", "sdk-python");
export const VENV_DIR = join(ROOT, ".local", "python-sdk-venv");

export interface ToolRun {
  code: number | null;
  output: string;
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

async function must(command: string, args: string[], cwd = ROOT): Promise<string> {
  const result = await runTool(command, args, { cwd });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${result.code}:\n${result.output}`);
  return result.output;
}

/** A Python of at least 3.11 on the PATH. */
async function python(): Promise<string> {
  for (const candidate of ["python3.11", "python3.12", "python3.13", "python3"]) {
    const probe = await runTool(candidate, ["-c", "import sys; print(sys.version_info >= (3, 11))"], { cwd: ROOT }).catch(() => null);
    if (probe?.code === 0 && probe.output.trim() === "True") return candidate;
  }
  throw new Error("the Python SDK's tests need Python 3.11 or later on the PATH (python3.11 or python3)");
}

/**
 * The venv, made once and reused: the pinned tools of requirements-dev.txt are installed again only
 * when that file changes; the package itself is built and installed (not editable) on every call.
 */
export async function pythonSdkVenv(): Promise<{ bin(name: string): string }> {
  const bin = (name: string) => join(VENV_DIR, "bin", name);
  if (!existsSync(bin("python"))) await must(await python(), ["-m", "venv", VENV_DIR]);
  const requirements = join(PYTHON_SDK_DIR, "requirements-dev.txt");
  const digest = createHash("sha256").update(readFileSync(requirements)).digest("hex");
  const marker = join(VENV_DIR, "requirements-dev.sha256");
  if (!existsSync(marker) || readFileSync(marker, "utf8") !== digest) {
    await must(bin("python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", requirements]);
    writeFileSync(marker, digest);
  }
  // hatchling is pinned in requirements-dev.txt, so the build needs no download of its own.
  await must(bin("python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-build-isolation", "--no-deps", "--force-reinstall", PYTHON_SDK_DIR]);
  return { bin };
}

/** The contract's schemas as JSON Schema components (named like the exports), and its constants. */
export function contractDump(): object {
  const schemas = { DecisionResponse, NoulAnswer, ChoiceAnswer, ScoreAnswer, Usage, ModelList, ModelItem, Batch, BatchList, ResultRecord, ResultsPage, ErrorEnvelope };
  return {
    components: {
      schemas: Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, z.toJSONSchema(schema, { io: "output", unrepresentable: "any" })])),
    },
    constants: {
      SHARED_ALIAS,
      REQUEST_ID_HEADER,
      toolRequestTimeoutMs: LIMITS.toolRequestTimeoutMs,
      httpConnectionsPerService: LIMITS.httpConnectionsPerService,
      bulkFileBytes: LIMITS.bulkFileBytes,
      bulkFileRecords: LIMITS.bulkFileRecords,
      batchListPageDefault: BATCH_LIST_PAGE.default,
      BATCH_STATUSES,
      TERMINAL_STATUSES,
    },
  };
}
