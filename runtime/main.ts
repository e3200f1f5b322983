/**
 * Entry point of a model runtime (runs under Bun on the GPU host, or on a developer machine's CPU):
 *
 *     RUNTIME_MODEL_PATH=model.gguf RUNTIME_SECRET=… RUNTIME_PORT=8090 bun runtime/main.ts
 *
 * Environment:
 *   RUNTIME_MODEL_PATH            GGUF weights (required)
 *   RUNTIME_ADAPTER_PATH          GGUF LoRA adapter served on top of the weights (optional)
 *   RUNTIME_RELEASE_ID            release id to report (default: derived from the file name and fingerprint)
 *   RUNTIME_SECRET                bearer secret every call must carry (required)
 *   RUNTIME_HOST, RUNTIME_PORT    where to listen (default host 127.0.0.1; port required, 0 picks one)
 *   RUNTIME_MAX_TOKENS_PER_PASS   longest pass evaluated (default LIMITS.tokensPerPass)
 *   RUNTIME_THREADS               CPU threads for evaluation (default 2)
 *   RUNTIME_GPU                   unset or "false" for the CPU build; "auto", "cuda" or "vulkan" on a GPU host
 *
 * Once listening it prints one line to stdout, for whoever started it:
 *
 *     RUNTIME READY {"port":8090,"release_id":"local-…","fingerprint":"…"}
 */
import { LIMITS } from "../contract/limits.ts";
import { Identity, RENDERING_VERSION } from "../contract/runtime-protocol.ts";
import { cachedSha256 } from "./digest.ts";
import { Engine, type EngineOptions } from "./engine.ts";
import { defaultReleaseId, fingerprintOf } from "./fingerprint.ts";
import { createRuntimeApp } from "./server.ts";

interface RuntimeConfig {
  engine: EngineOptions;
  releaseId: string | undefined;
  secret: string;
  host: string;
  port: number;
}

function configFromEnv(env: Record<string, string | undefined>): RuntimeConfig {
  const required = (name: string): string => {
    const value = env[name];
    if (!value) throw new Error(`${name} is required`);
    return value;
  };
  const integer = (name: string, fallback: number | undefined, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") {
      if (fallback === undefined) throw new Error(`${name} is required`);
      return fallback;
    }
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}`);
    return value;
  };
  const gpu = env.RUNTIME_GPU ?? "false";
  if (!["false", "auto", "cuda", "vulkan", "metal"].includes(gpu)) {
    throw new Error('RUNTIME_GPU must be "false", "auto", "cuda", "vulkan" or "metal"');
  }
  return {
    engine: {
      modelPath: required("RUNTIME_MODEL_PATH"),
      adapterPath: env.RUNTIME_ADAPTER_PATH || null,
      maxTokensPerPass: integer("RUNTIME_MAX_TOKENS_PER_PASS", LIMITS.tokensPerPass, 2, 1 << 20),
      threads: integer("RUNTIME_THREADS", 2, 1, 1024),
      gpu: gpu === "false" ? false : (gpu as EngineOptions["gpu"]),
    },
    releaseId: env.RUNTIME_RELEASE_ID || undefined,
    secret: required("RUNTIME_SECRET"),
    host: env.RUNTIME_HOST || "127.0.0.1",
    port: integer("RUNTIME_PORT", undefined, 0, 65535),
  };
}

async function main(): Promise<void> {
  let config: RuntimeConfig;
  try {
    config = configFromEnv(process.env);
  } catch (err) {
    console.error(`runtime: ${(err as Error).message}; refusing to start`);
    process.exit(2);
  }
  const { modelPath, adapterPath } = config.engine;

  const fingerprint = fingerprintOf({
    weightsSha256: await cachedSha256(modelPath),
    adapterSha256: adapterPath ? await cachedSha256(adapterPath) : null,
    renderingVersion: RENDERING_VERSION,
  });

  const started = performance.now();
  const engine = await Engine.load(config.engine);
  console.error(`runtime: loaded ${modelPath}${adapterPath ? ` with adapter ${adapterPath}` : ""} in ${Math.round(performance.now() - started)} ms`);

  const identity = Identity.parse({
    release_id: config.releaseId ?? defaultReleaseId(modelPath, fingerprint),
    fingerprint,
    rendering_version: RENDERING_VERSION,
    modalities: ["text"],
    max_tokens_per_pass: engine.maxTokensPerPass,
    engine: engine.description,
  });
  const app = createRuntimeApp(engine, identity, config.secret);
  const server = Bun.serve({ hostname: config.host, port: config.port, fetch: app.fetch });

  const shutdown = async () => {
    await server.stop(true);
    await engine.dispose();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown());
  process.once("SIGINT", () => void shutdown());

  const ready = { port: server.port, release_id: identity.release_id, fingerprint };
  console.log(`RUNTIME READY ${JSON.stringify(ready)}`);
}

main().catch((err: unknown) => {
  console.error(`runtime: failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
