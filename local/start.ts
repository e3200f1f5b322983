/**
 * `npm start`: the whole service on loopback with its embedded defaults, until Ctrl-C.
 * Runs on a developer machine (under Bun). Data lives in `.local/stack/` and survives restarts.
 *
 * Settings: PORT (edge, default 8787), DATABASE_URL, REDIS_URL (use these instead of the private
 * servers), SVC_MODEL_PATH (any GGUF instead of the default model).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { portInUse } from "./ports.ts";
import { ROOT, startStack } from "./stack.ts";

const dataDir = join(ROOT, ".local/stack");
const lockPath = join(ROOT, ".local/stack.lock.json");
const edgePort = Number(process.env.PORT ?? 8787);

function running(): { pid: number; baseUrl: string } | null {
  if (!existsSync(lockPath)) return null;
  try {
    const lock = JSON.parse(readFileSync(lockPath, "utf8")) as { pid: number; baseUrl: string };
    process.kill(lock.pid, 0);
    return lock;
  } catch {
    return null;
  }
}

const other = running();
if (other) {
  console.error(`The service is already running at ${other.baseUrl} (npm start, pid ${other.pid}). Stop it with Ctrl-C in its terminal.`);
  process.exit(1);
}
if (await portInUse(edgePort)) {
  console.error(`Port ${edgePort} is already in use by another program; set PORT to use another port.`);
  process.exit(1);
}

const started = performance.now();
console.error("Starting the decision service on loopback (first start installs the model once)...");
const stack = await startStack({ dataDir, edgePort, log: (line) => console.error(`  ${line}`) });
writeFileSync(lockPath, JSON.stringify({ pid: process.pid, baseUrl: stack.baseUrl }));

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

${stack.pieces.map((p) => `  ${p.name.padEnd(width)}  ${p.where}`).join("\n")}

  Logs: ${join(dataDir, "logs")}
  Default model: svc-shared -> ${stack.release.release_id}

First request:
  curl ${stack.baseUrl}/health

Press Ctrl-C to stop everything.`);
