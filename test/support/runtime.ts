/**
 * Starts a real runtime process (`bun runtime/main.ts`) for tests, on a free port, with every
 * RUNTIME_* setting given so that a developer's own settings cannot leak in. Ready means the
 * runtime's READY line, which it prints once it is listening.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../local/ports.ts";
import { start, type Child } from "../../local/process.ts";
import { ROOT } from "../../local/stack.ts";

export interface TestRuntime {
  url: string;
  child: Child;
  /** What the READY line announced. */
  ready: { port: number; release_id: string; fingerprint: string };
}

export function runtimeEnv(modelPath: string, secret: string): Record<string, string> {
  return {
    RUNTIME_MODEL_PATH: modelPath,
    RUNTIME_ADAPTER_PATH: "",
    RUNTIME_RELEASE_ID: "",
    RUNTIME_SECRET: secret,
    RUNTIME_HOST: "127.0.0.1",
    RUNTIME_MAX_TOKENS_PER_PASS: "",
    RUNTIME_THREADS: "2",
    RUNTIME_GPU: "false",
  };
}

export async function startRuntime(opts: {
  name: string;
  modelPath: string;
  secret: string;
  logDir: string;
  env?: Record<string, string>;
}): Promise<TestRuntime> {
  const port = await freePort();
  const logPath = join(opts.logDir, `${opts.name}.log`);
  let ready: TestRuntime["ready"] | undefined;
  const child = await start({
    name: opts.name,
    command: join(ROOT, "node_modules/.bin/bun"),
    args: ["runtime/main.ts"],
    cwd: ROOT,
    env: { ...runtimeEnv(opts.modelPath, opts.secret), RUNTIME_PORT: String(port), ...opts.env },
    logPath,
    ready: async () => {
      const line = (await readFile(logPath, "utf8")).split("\n").find((l) => l.startsWith("RUNTIME READY "));
      if (line) ready = JSON.parse(line.slice("RUNTIME READY ".length)) as TestRuntime["ready"];
      return ready !== undefined;
    },
    timeoutMs: 60_000,
  });
  return { url: `http://127.0.0.1:${port}`, child, ready: ready! };
}
