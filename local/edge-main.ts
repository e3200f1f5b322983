/**
 * The edge Worker under Miniflare's own API: the bundle `wrangler deploy` would upload, run by workerd
 * with no dev proxy in front of it and no Node process relaying its outbound fetches (runs on a
 * developer machine or in tests, under Bun, never in production). local/edge.ts starts it.
 *
 * Settings (all required): EDGE_PORT, EDGE_ENV_FILE (the Worker's settings as KEY=value lines, mode
 * 0600), EDGE_DATA_DIR (the bundle and R2's local data go there). Prints `EDGE READY <url>` once it
 * answers; SIGTERM stops workerd.
 */
import { spawnSync } from "node:child_process";
import { cpSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { discardedLog, r2Dir } from "./edge.ts";
import { ROOT } from "./tiers.ts";

const port = Number(process.env.EDGE_PORT);
const envFile = process.env.EDGE_ENV_FILE;
const dataDir = process.env.EDGE_DATA_DIR;
if (!Number.isInteger(port) || !envFile || !dataDir) throw new Error("EDGE_PORT, EDGE_ENV_FILE and EDGE_DATA_DIR are required");

interface WranglerConfig {
  main: string;
  compatibility_date: string;
  compatibility_flags?: string[];
  r2_buckets?: { binding: string }[];
  assets?: { directory: string; binding: string; run_worker_first?: boolean };
}
const configPath = join(ROOT, "wrangler.toml");
const config = Bun.TOML.parse(readFileSync(configPath, "utf8")) as WranglerConfig;

// The same bundle production runs: wrangler's own build of `main`, without uploading it.
// One bundle per edge too: edges starting together over one data directory must not rebuild each other's.
const outdir = join(dataDir, `edge-bundle-${port}`);
rmSync(outdir, { recursive: true, force: true });
const build = spawnSync(
  "node",
  [join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--outdir", outdir, "--config", configPath],
  {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", XDG_CONFIG_HOME: join(dataDir, "config"), WRANGLER_LOG_PATH: discardedLog(dataDir) },
  },
);
if (build.status !== 0) throw new Error(`wrangler could not bundle the edge:\n${build.stdout}${build.stderr}`);

const bindings = Object.fromEntries(
  readFileSync(envFile, "utf8")
    .split("\n")
    .filter((line) => line.includes("="))
    .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
);
// One folder per edge: a stack may run several edges over one data directory (stack.addEdge). It is a
// copy of what wrangler's [build] step just wrote, which another edge's start may replace at any time
// (renamed into place whole: a copy that loses that race is taken again).
const consoleAssets = join(dataDir, `console-assets-${port}`);
if (config.assets) {
  for (let attempt = 1; ; attempt++) {
    try {
      rmSync(consoleAssets, { recursive: true, force: true });
      cpSync(join(ROOT, config.assets.directory), consoleAssets, { recursive: true });
      break;
    } catch (err) {
      if (attempt >= 5) throw err;
      await Bun.sleep(200);
    }
  }
}
const edge = {
  name: "edge",
  modules: true,
  modulesRoot: outdir,
  scriptPath: join(outdir, "index.js"),
  compatibilityDate: config.compatibility_date,
  compatibilityFlags: config.compatibility_flags ?? [],
  bindings,
  r2Buckets: (config.r2_buckets ?? []).map((bucket) => bucket.binding),
};
const mf = new Miniflare({
  workers: config.assets ? withAssets(config.assets) : [edge],
  // Where `wrangler dev --persist-to <dataDir>` keeps R2 too, so both ways of running share objects.
  r2Persist: r2Dir(dataDir),
  host: "127.0.0.1",
  port,
});
const url = await mf.ready;
console.log(`EDGE READY ${url.origin}`);

const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

/**
 * The Worker with the web console's files behind it, as deployed: this edge's own build of them
 * (workerd keeps the folder open, so a later build of .local/console by another edge must not replace
 * it). With `run_worker_first` Cloudflare runs the Worker for every request and the Worker reaches the
 * files through its binding. Miniflare's assets router in front of it would only hand each request on,
 * one more worker hop each, so the Worker answers first-hand and its binding goes to a worker that
 * serves the files alone, as Cloudflare's does.
 */
function withAssets(assets: NonNullable<WranglerConfig["assets"]>) {
  if (!assets.run_worker_first) {
    return [{ ...edge, assets: { directory: consoleAssets, binding: assets.binding, routerConfig: { has_user_worker: true, invoke_user_worker_ahead_of_assets: false } } }];
  }
  const files = {
    name: "console-assets",
    modules: true,
    script: "export default {};",
    compatibilityDate: config.compatibility_date,
    assets: { directory: consoleAssets, binding: assets.binding, routerConfig: { has_user_worker: false } },
  };
  return [{ ...edge, serviceBindings: { [assets.binding]: files.name } }, files];
}
