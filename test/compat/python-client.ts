/**
 * Installs the official Python client (`typesafe-sdk`, unchanged, from the Python package index) and
 * pytest into `.local/py-compat`, once; runs only in tests. The folder is reinstalled whenever
 * `requirements.txt` beside this file changes, and is filled under a temporary name then renamed, so
 * an interrupted install never looks complete.
 *
 *     const pythonPath = await ensurePythonClient();
 *     // PYTHONPATH=<pythonPath> python3 -m pytest test/compat/test_python_client.py
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdir, rename, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

const ROOT = resolve(import.meta.dirname, "../..");

export const COMPAT_DIR = join(ROOT, "test/compat");
const REQUIREMENTS = join(COMPAT_DIR, "requirements.txt");
const TARGET = join(ROOT, ".local/py-compat");
/** A copy of the requirements the folder was filled from: the install is current when it matches. */
const STAMP = join(TARGET, "installed-requirements.txt");

export async function ensurePythonClient(): Promise<string> {
  const wanted = readFileSync(REQUIREMENTS, "utf8");
  if (existsSync(STAMP) && readFileSync(STAMP, "utf8") === wanted) return TARGET;

  const partial = `${TARGET}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(join(ROOT, ".local"), { recursive: true });
  try {
    await run(
      "python3",
      ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts", "--target", partial, "-r", REQUIREMENTS],
      { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, PIP_ROOT_USER_ACTION: "ignore" } },
    );
    await copyFile(REQUIREMENTS, join(partial, "installed-requirements.txt"));
    await rm(TARGET, { recursive: true, force: true });
    await rename(partial, TARGET);
  } catch (err) {
    await rm(partial, { recursive: true, force: true });
    const output = err instanceof Error && "stderr" in err ? String(err.stderr) : String(err);
    throw new Error(`could not install the Python client (python3 -m pip install -r ${REQUIREMENTS}): ${output}`);
  }
  return TARGET;
}
