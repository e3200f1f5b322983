/**
 * Entry point of an image runtime (runs under Bun on the GPU host, or on a developer machine's CPU):
 * one ONNX image backbone behind the runtime protocol's image calls (server-shared/runtime-protocol.ts).
 *
 *     RUNTIME_MODEL_PATH=efficientnet-lite0-256.onnx RUNTIME_SECRET=… RUNTIME_PORT=8091 bun runtime/image-main.ts
 *
 * Environment (the text runtime's names, where they mean the same):
 *   RUNTIME_MODEL_PATH            the ONNX backbone (required; local/image-backbone.ts makes the default one)
 *   RUNTIME_RELEASE_ID            release id to report (default: derived from the file name and fingerprint)
 *   RUNTIME_SECRET                bearer secret every call must carry (required), or RUNTIME_SECRET_FILE;
 *                                 `new,old` while rotating; SIGHUP reads the file again
 *   METRICS_SECRET                the operator's scrape secret for GET /metrics (or METRICS_SECRET_FILE); unset: no /metrics
 *   RUNTIME_HOST, RUNTIME_PORT    where to listen (default host 127.0.0.1; port required, 0 picks one)
 *   RUNTIME_MAX_VISUAL_TOKENS     the most visual tokens one image may need (default and most LIMITS.imageVisualTokens)
 *   RUNTIME_THREADS               CPU threads for the backbone (default 2)
 *
 * Once listening it prints one line to stdout, for whoever started it:
 *
 *     RUNTIME READY {"port":8091,"release_id":"local-efficientnet-lite0-256-…","fingerprint":"…"}
 */
import { basename } from "node:path";
import { z } from "zod";
import { LIMITS } from "../contract/limits.ts";
import { cachedSha256 } from "../server-shared/digest.ts";
import { Identity, IMAGE_PREPROCESSING_VERSION } from "../server-shared/runtime-protocol.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { integer, optional, parseSettings, required } from "../server-shared/settings.ts";
import { defaultReleaseId, fingerprintOf } from "./fingerprint.ts";
import { ImageEngine } from "./image-engine.ts";
import { serveRuntime } from "./serve.ts";
import { createImageRuntimeApp } from "./server.ts";

const ImageRuntimeSettings = z.object({
  RUNTIME_MODEL_PATH: required(),
  RUNTIME_RELEASE_ID: optional(),
  RUNTIME_SECRET: optional(),
  RUNTIME_HOST: optional().transform((host) => host ?? "127.0.0.1"),
  RUNTIME_PORT: integer(0, 65535),
  RUNTIME_MAX_VISUAL_TOKENS: integer(1, LIMITS.imageVisualTokens, LIMITS.imageVisualTokens),
  RUNTIME_THREADS: integer(1, 1024, 2),
});

async function main(): Promise<void> {
  let settings: z.infer<typeof ImageRuntimeSettings>;
  const secrets = new SecretSource(process.env);
  try {
    settings = parseSettings("image runtime", ImageRuntimeSettings, process.env);
    if (!secrets.list("RUNTIME_SECRET")) throw new Error("image runtime: setting RUNTIME_SECRET (or RUNTIME_SECRET_FILE) is required");
  } catch (err) {
    console.error(`${(err as Error).message.replace(/^(?!image runtime: )/, "image runtime: ")}; refusing to start`);
    process.exit(2);
  }
  const modelPath = settings.RUNTIME_MODEL_PATH;
  const fingerprint = fingerprintOf({ weightsSha256: await cachedSha256(modelPath), adapterSha256: null, renderingVersion: IMAGE_PREPROCESSING_VERSION });
  const started = performance.now();
  const engine = await ImageEngine.load({ modelPath, threads: settings.RUNTIME_THREADS, maxVisualTokens: settings.RUNTIME_MAX_VISUAL_TOKENS });
  console.error(`image runtime: loaded ${basename(modelPath)} in ${Math.round(performance.now() - started)} ms`);

  const identity = Identity.parse({
    release_id: settings.RUNTIME_RELEASE_ID ?? defaultReleaseId(modelPath.replace(/\.onnx$/i, ""), fingerprint),
    fingerprint,
    rendering_version: IMAGE_PREPROCESSING_VERSION,
    modalities: ["image"],
    max_tokens_per_pass: engine.maxVisualTokens,
    engine: engine.description,
  });
  const app = createImageRuntimeApp(engine, identity, () => secrets.list("RUNTIME_SECRET")!.accepted, () => secrets.list("METRICS_SECRET")?.accepted);
  serveRuntime({ label: "image runtime", hostname: settings.RUNTIME_HOST, port: settings.RUNTIME_PORT, fetch: app.fetch, identity, secrets, dispose: () => engine.dispose() });
}

main().catch((err: unknown) => {
  console.error(`image runtime: failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
