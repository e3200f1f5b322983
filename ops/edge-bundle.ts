/**
 * `npm run build:edge`: the production edge bundle, built exactly as `wrangler deploy --env
 * production` would upload it (its `--dry-run`), into `.local/edge-production/`, with its size printed
 * against Cloudflare's limit. Runs on an operator's or CI's machine under Bun; uploads nothing.
 *
 *     edge bundle (env production): 1392.4 KiB, gzip 265.9 KiB (Cloudflare's limit: 3072 KiB gzip on Workers Free)
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";

const ROOT = resolve(import.meta.dirname, "..");

/** Cloudflare's limit on a Worker's compressed size on the Free plan (the Paid plan allows 10 MiB). */
export const WORKER_GZIP_LIMIT_BYTES = 3 * 1024 * 1024;

export interface EdgeBundle {
  /** The Worker's entry module as it would be uploaded. */
  path: string;
  bytes: number;
  gzipBytes: number;
  /** What wrangler printed (the bindings the Worker would get; no secret values: they are not in the file). */
  output: string;
}

/** Bundles the edge for wrangler environment `env` into `outdir`; throws with wrangler's output when it cannot. */
export function buildEdgeBundle(env: string, outdir: string): EdgeBundle {
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(join(ROOT, ".local", "wrangler-config"), { recursive: true });
  const build = spawnSync(
    "node",
    [join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--env", env, "--outdir", outdir, "--config", join(ROOT, "wrangler.toml")],
    {
      cwd: ROOT,
      encoding: "utf8",
      // Nothing leaves the machine: no metrics, no account lookup, no prompt.
      env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", XDG_CONFIG_HOME: join(ROOT, ".local", "wrangler-config") },
    },
  );
  const output = `${build.stdout}${build.stderr}`;
  if (build.status !== 0) throw new Error(`wrangler could not bundle the edge (env ${env}):\n${output}`);
  const path = join(outdir, "index.js");
  const code = readFileSync(path);
  return { path, bytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length, output };
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

if (import.meta.main) {
  const bundle = buildEdgeBundle("production", join(ROOT, ".local", "edge-production"));
  console.log(`edge bundle (env production): ${kib(bundle.bytes)}, gzip ${kib(bundle.gzipBytes)} (Cloudflare's limit: ${kib(WORKER_GZIP_LIMIT_BYTES)} gzip on Workers Free)`);
  if (bundle.gzipBytes > WORKER_GZIP_LIMIT_BYTES) {
    console.error("The edge bundle is over Cloudflare's limit: wrangler deploy would refuse it.");
    process.exit(1);
  }
}
