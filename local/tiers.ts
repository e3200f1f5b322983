/**
 * The GPU host's two processes, started for the local stack and for tests (runs on a developer
 * machine or in tests, never in production; production runs them as services): a runtime serving
 * one GGUF (or an image runtime serving one ONNX backbone), and a sidecar.
 *
 *     const runtime = await startRuntime({ name: "runtime", modelPath, secret, logDir });
 *     const sidecar = await startSidecar({ name: "sidecar", secret, database, runtimeSecrets, edgeUrl, upstash, logDir });
 *
 * Every setting of a child is given explicitly, so that a developer's own settings cannot leak in.
 */
import { join, resolve } from "node:path";
import { SIDECAR_PATHS } from "../server-shared/sidecar-protocol.ts";
import { freePort } from "./ports.ts";
import { announced, start, type Child } from "./process.ts";

export const ROOT = resolve(import.meta.dirname, "..");
export const BUN = join(ROOT, "node_modules/.bin/bun");

export interface StartedRuntime {
  url: string;
  child: Child;
  /** What the READY line announced. */
  ready: { port: number; release_id: string; fingerprint: string };
}

export function runtimeEnv(modelPath: string, secret: string): Record<string, string> {
  return {
    RUNTIME_MODEL_PATH: modelPath,
    RUNTIME_ADAPTER_PATH: "",
    RUNTIME_ENCODER_PATH: "",
    RUNTIME_RELEASE_ID: "",
    RUNTIME_SECRET: secret,
    RUNTIME_HOST: "127.0.0.1",
    RUNTIME_MAX_TOKENS_PER_PASS: "",
    RUNTIME_THREADS: "2",
    // Unset: the GPU build where the machine has a GPU, else the CPU build.
    RUNTIME_GPU: "",
  };
}

/** A runtime on a free port; ready once it prints its READY line, which it does once listening. */
export async function startRuntime(opts: {
  name: string;
  modelPath: string;
  secret: string;
  logDir: string;
  env?: Record<string, string>;
  /** A free one when absent (a restart passes the port the registry names). */
  port?: number;
  /** "image": an image runtime (runtime/image-main.ts) serving the ONNX backbone at `modelPath`. */
  kind?: "text" | "image";
  /** A text runtime's sentence encoder (local/text-encoder.ts), for /v1/embed; none when absent. */
  encoderPath?: string;
}): Promise<StartedRuntime> {
  const port = opts.port ?? (await freePort());
  const logPath = join(opts.logDir, `${opts.name}.log`);
  let ready: StartedRuntime["ready"] | undefined;
  const child = await start({
    name: opts.name,
    command: BUN,
    args: [opts.kind === "image" ? "runtime/image-main.ts" : "runtime/main.ts"],
    cwd: ROOT,
    env: { ...runtimeEnv(opts.modelPath, opts.secret), RUNTIME_PORT: String(port), ...(opts.encoderPath ? { RUNTIME_ENCODER_PATH: opts.encoderPath } : {}), ...opts.env },
    logPath,
    ready: async (output) => (ready = announced<StartedRuntime["ready"]>(await output(), "RUNTIME READY ")) !== undefined,
    timeoutMs: 120_000,
  });
  return { url: `http://127.0.0.1:${port}`, child, ready: ready! };
}

/** A free loopback address for a sidecar, known before it starts so that the registry can name it. */
export async function sidecarAddress(): Promise<{ port: number; url: string }> {
  const port = await freePort();
  return { port, url: `http://127.0.0.1:${port}` };
}

/** A sidecar at `address`, serving the releases whose registry `sidecar_url` is `address.url`. */
export async function startSidecar(opts: {
  name: string;
  address: { port: number; url: string };
  secret: string;
  /** DATABASE_URL, and NEON_LOCAL_BRIDGE for a loopback one (local/stack.ts `databaseSettings`). */
  database: { DATABASE_URL: string; NEON_LOCAL_BRIDGE?: string };
  /** Runtime secrets under the variable names the registry's `token_env` gives. */
  runtimeSecrets: Record<string, string>;
  /** The edge the bulk worker asks for storage grants. */
  edgeUrl: string;
  /** The Upstash REST endpoint and token (quota admission of bulk records). */
  upstash: { url: string; token: string };
  /** WEBHOOK_SECRET_KEY, the edge's: required unless `extraEnv` turns JOB_WORKERS off (no webhook sender then). */
  webhookKey?: string;
  /** More settings (JOB_WORKERS; a test's SVC_TEST_* settings start it from test/support/sidecar-main.ts). */
  extraEnv?: Record<string, string>;
  logDir: string;
}): Promise<Child> {
  // A test's or a benchmark's settings (SVC_TEST_*) are taken by the sidecar's test entry, never by production's.
  const tuned = Object.keys(opts.extraEnv ?? {}).some((name) => name.startsWith("SVC_TEST_"));
  return start({
    name: opts.name,
    command: BUN,
    args: [join(ROOT, tuned ? "test/support/sidecar-main.ts" : "sidecar/main.ts")],
    env: {
      SIDECAR_SECRET: opts.secret,
      SIDECAR_URL: opts.address.url,
      SIDECAR_PORT: String(opts.address.port),
      SIDECAR_HOST: "127.0.0.1",
      ...opts.database,
      EDGE_URL: opts.edgeUrl,
      UPSTASH_REDIS_REST_URL: opts.upstash.url,
      UPSTASH_REDIS_REST_TOKEN: opts.upstash.token,
      ...(opts.webhookKey ? { WEBHOOK_SECRET_KEY: opts.webhookKey } : {}),
      // Webhook receivers on this machine (a developer's, a test's): never in production.
      WEBHOOK_PRIVATE_TARGETS: "on",
      ...opts.runtimeSecrets,
      ...opts.extraEnv,
    },
    logPath: join(opts.logDir, `${opts.name}.log`),
    ready: async () => (await fetch(`${opts.address.url}${SIDECAR_PATHS.health}`)).status === 401,
  });
}
