/**
 * `npm run bench:resets` (bun bench/resets.ts): connection resets under a bounded load of mixed requests (bench/resets-load.ts)
 * at 32 keep-alive connections, counted per request kind, for each way of running the edge and each
 * Node client. It starts an isolated stack and makes an API key; the load runs in a Node process (not
 * Bun's own node:http), so the clients are the ones Node users have.
 *
 * Edges (EDGES, default "miniflare,workerd"):
 *   - miniflare: the stack's edge (local/edge-main.ts: the bundle under Miniflare's API).
 *   - wrangler-dev: `wrangler dev` over the same services.
 *   - workerd: the same bundle served by workerd alone, with no Miniflare entry Worker in front: the
 *     runtime production runs, as near as a machine without Cloudflare gets. It has no R2 binding (no
 *     request of the mix touches R2).
 * Settings: TOTAL (requests per edge and client, default 10000), CONNECTIONS (default 32),
 * CLIENTS (default "agent,fetch"), KINDS (a comma-separated subset of the kinds' names), MAX_SECONDS
 * (per run, default 120).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import type { EdgeKind } from "../local/edge.ts";
import { freePort } from "../local/ports.ts";
import { start, type Child } from "../local/process.ts";
import { startStack } from "../local/stack.ts";
import { ROOT } from "../local/tiers.ts";
import { benchKey } from "./keys.ts";
import type { LoadOptions } from "./resets-load.ts";

const edges = (process.env.EDGES ?? "miniflare,workerd").split(",");
const clients = (process.env.CLIENTS ?? "agent,fetch").split(",") as LoadOptions["client"][];
const total = Number(process.env.TOTAL ?? 10_000);
const connections = Number(process.env.CONNECTIONS ?? 32);
const maxMs = Number(process.env.MAX_SECONDS ?? 120) * 1000;
const only = process.env.KINDS?.split(",");

const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
chmodSync(dataDir, 0o711);
const stack = await startStack({ dataDir, log: () => {} });
let workerd: Child | undefined;
try {
  const apiKey = await benchKey(stack, "bench-resets");

  // The load generator as one ES module that Node imports.
  const built = await Bun.build({ entrypoints: [join(ROOT, "bench/resets-load.ts")], target: "node", format: "esm", outdir: join(dataDir, "load") });
  if (!built.success) throw new Error(`could not bundle the load generator: ${built.logs.join("\n")}`);
  const loadModule = built.outputs[0]!.path;

  for (const edge of edges) {
    let baseUrl = stack.baseUrl;
    if (edge === "workerd") {
      const bare = await startBareWorkerd(dataDir);
      workerd = bare.child;
      baseUrl = bare.baseUrl;
    } else if (edge !== "miniflare") {
      baseUrl = (await stack.addEdge(edge as EdgeKind)).baseUrl;
    }
    for (const client of clients) {
      const options: LoadOptions = { baseUrl, apiKey, client, total, connections, maxMs, ...(only ? { only } : {}) };
      const run = spawnSync(
        "node",
        ["--input-type=module", "-e", `const { runLoad, formatReport } = await import(${JSON.stringify(loadModule)}); console.log(formatReport(await runLoad(JSON.parse(process.env.LOAD))));`],
        { encoding: "utf8", env: { ...process.env, LOAD: JSON.stringify(options) }, timeout: maxMs + 60_000 },
      );
      console.log(`edge ${edge}: ${run.stdout.trim()}${run.status === 0 ? "" : `\n  load generator failed: ${run.stderr.trim()}`}`);
    }
  }
} finally {
  await workerd?.stop();
  await stack.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

/**
 * The bundle local/edge-main.ts built (under `dataDir`), served by workerd with the stack's settings
 * as plain-text bindings, and outbound fetches allowed to loopback (the stack's bridges and sidecar).
 */
async function startBareWorkerd(dir: string): Promise<{ baseUrl: string; child: Child }> {
  const port = await freePort();
  const config = Bun.TOML.parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { compatibility_date: string; compatibility_flags?: string[] };
  const capnpText = (value: string) => {
    // JSON's escapes are Cap'n Proto's too, for the printable ASCII settings hold.
    if (!/^[\x20-\x7e]*$/.test(value)) throw new Error("a setting holds a character this config writer does not escape");
    return JSON.stringify(value);
  };
  const bindings = readFileSync(join(dir, "edge.env"), "utf8")
    .split("\n")
    .filter((line) => line.includes("="))
    .map((line) => `(name = ${capnpText(line.slice(0, line.indexOf("=")))}, text = ${capnpText(line.slice(line.indexOf("=") + 1))})`);
  // Beside the bundle: an embed path is relative to the config file (an absolute one names an import root).
  const configPath = join(dir, "workerd.capnp");
  writeFileSync(
    configPath,
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "edge", worker = .edge), (name = "loopback", network = (allow = ["public", "private", "local"])) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "edge") ],
);
const edge :Workerd.Worker = (
  modules = [ (name = "index.js", esModule = embed "edge-bundle/index.js") ],
  compatibilityDate = ${capnpText(config.compatibility_date)},
  compatibilityFlags = [${(config.compatibility_flags ?? []).map(capnpText).join(", ")}],
  bindings = [${bindings.join(", ")}],
  globalOutbound = "loopback",
);
`,
    { mode: 0o600 },
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  const child = await start({
    name: "workerd",
    command: join(ROOT, "node_modules/workerd/bin/workerd"),
    args: ["serve", configPath],
    logPath: join(dir, "logs", "edge-workerd.log"),
    ready: async () => (await fetch(`${baseUrl}/__ready`)).status === 404,
    timeoutMs: 30_000,
  });
  return { baseUrl, child };
}
