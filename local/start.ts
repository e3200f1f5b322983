/**
 * `npm start`: the whole service on loopback with its embedded defaults, until Ctrl-C.
 * Runs on a developer machine (under Bun). Data lives in `.local/stack/` (or SVC_STACK_DIR) and
 * survives restarts; `stack.json` there names the running stack for the local commands.
 *
 * Settings: PORT (edge, default 8787), DATABASE_URL, REDIS_URL (use these instead of the private
 * servers), SVC_MODEL_PATH (any GGUF instead of the default model), SVC_EDGE=wrangler-dev (run the
 * edge under `wrangler dev`, which rebuilds on every edit, instead of the bundle under Miniflare),
 * IMAGE_API=on and IMAGE_BROWSER=on (the image vertical's two flags, passed to the edge; default off).
 */
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EDGE_KINDS, type EdgeKind } from "./edge.ts";
import { portInUse } from "./ports.ts";
import { stopLeftovers } from "./process.ts";
import { runningStack, stackDir, type RunningStack } from "./running.ts";
import { RUNTIME_TOKEN_ENV, startStack } from "./stack.ts";

const dataDir = stackDir();
const lockPath = join(dataDir, "stack.json");
const edgePort = Number(process.env.PORT ?? 8787);
// A fixed issuer port keeps user tokens and the CLI's sign-in valid across restarts.
const idpPort = edgePort + 1;

const edge = process.env.SVC_EDGE || "miniflare";
if (!(EDGE_KINDS as readonly string[]).includes(edge)) {
  console.error(`SVC_EDGE must be one of ${EDGE_KINDS.join(", ")}; got ${JSON.stringify(edge)}.`);
  process.exit(1);
}

const other = runningStack();
if (other) {
  console.error(`The service is already running at ${other.baseUrl} (npm start, pid ${other.pid}). Stop it with Ctrl-C in its terminal.`);
  process.exit(1);
}
// A launcher killed with SIGKILL leaves its children running (each has a process group of its own):
// they would hold the ports and the data. Stopped first, saying so.
const stopped = await stopLeftovers(dataDir);
for (const log of stopped) console.error(`Stopped a process an earlier run left running (its log: ${log}).`);
for (const port of [edgePort, idpPort]) {
  // A port the stopped processes held may take the kernel a moment to free.
  for (let waited = 0; stopped.length > 0 && waited < 5000 && (await portInUse(port)); waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (await portInUse(port)) {
    console.error(`Port ${port} is already in use by another program; set PORT to use other ports (PORT and PORT+1).`);
    process.exit(1);
  }
}

const started = performance.now();
console.error("Starting the decision service on loopback (first start installs the model once)...");
const imageFlags = Object.fromEntries(["IMAGE_API", "IMAGE_BROWSER"].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])));
const stack = await startStack({ dataDir, edgePort, idpPort, edge: edge as EdgeKind, edgeVars: imageFlags, log: (line) => console.error(`  ${line}`) });
const lock: RunningStack = {
  pid: process.pid,
  baseUrl: stack.baseUrl,
  databaseUrl: stack.databaseUrl,
  runtimeSecrets: { [RUNTIME_TOKEN_ENV]: stack.secrets.runtime },
};
writeFileSync(lockPath, JSON.stringify(lock), { mode: 0o600 });

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.error("\nStopping...");
  await stack.stop();
  rmSync(lockPath, { force: true });
  console.error("Stopped.");
  process.exit(0);
}
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
for (const child of stack.children) {
  child.proc.once("exit", (code, signal) => {
    if (!stopping) console.error(`${child.name} exited (${signal ?? code}); its log: ${child.logPath}`);
  });
}

const width = Math.max(...stack.pieces.map((p) => p.name.length));
console.log(`
Decision service is up in ${((performance.now() - started) / 1000).toFixed(1)} s.

  Base URL: ${stack.baseUrl}
  Console:  ${stack.baseUrl}/console/   (sign in with any name at the local identity provider)

${stack.pieces.map((p) => `  ${p.name.padEnd(width)}  ${p.where}`).join("\n")}

  Logs: ${join(dataDir, "logs")}
  Default model: svc-shared -> ${stack.release.release_id}

First request:
  curl ${stack.baseUrl}/health

First API key (signs in as the development user of the local identity provider):
  TOKEN=$(npm run -s user-token)
  curl -s ${stack.baseUrl}/v1/keys -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{"name":"first"}'

Press Ctrl-C to stop everything.`);
