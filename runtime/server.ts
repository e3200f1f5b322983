/**
 * The runtime's HTTP face (runs in the runtime process on the GPU host): the calls of
 * server-shared/runtime-protocol.ts behind a bearer secret, with the gateway's error envelope. A text
 * runtime (createRuntimeApp) answers tokenize and score (and embed, with a sentence encoder), an image runtime (createImageRuntimeApp)
 * image-features; both answer identity and stats.
 *
 * Both serve Prometheus metrics at GET /metrics to a bearer of METRICS_SECRET (`metricsSecrets`; no
 * route where it is unset), outside the runtime secret, so a scraper holds no secret that scores:
 *
 *   svc_runtime_passes_total                   counter: passes evaluated
 *   svc_runtime_evaluated_tokens_total         counter: tokens evaluated (a kept prefix's are not counted again)
 *   svc_runtime_busy_seconds_total             counter: time the engine spent evaluating; rate() is its busy share
 *   svc_runtime_pass_duration_seconds{call}    histogram: one evaluation call (score, embed, image_features), as answered
 *   svc_runtime_errors_total{code}             counter: errors answered, by stable code
 *
 * Nothing here logs a request body or a header: prompts are customer data and the secret is a secret.
 */
import { Hono } from "hono";
import { readJson } from "../server-shared/body.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { errorRenderer, notFound, sharedSecret } from "../server-shared/http.ts";
import { METRICS_PATH, metricsHandler, Metrics } from "../server-shared/metrics.ts";
import { readGranted } from "../server-shared/grants.ts";
import {
  EmbedRequest,
  ImageFeaturesRequest,
  RUNTIME_BODY,
  RUNTIME_PATHS,
  ScoreRequest,
  TokenizeRequest,
  type EmbedResponse,
  type Identity,
  type ImageFeaturesResponse,
  type ScoreResponse,
  type Stats,
  type TokenizeResponse,
} from "../server-shared/runtime-protocol.ts";
import type { ScoringEngine } from "./engine.ts";
import type { ImageEngine } from "./image-engine.ts";
import type { SentenceEncoder } from "./text-encoder.ts";

/** `secrets`: the runtime secrets accepted at the time of a call (RUNTIME_SECRET's rotation list); `encoder`: the sentence encoder /v1/embed runs, if any. */
export function createRuntimeApp(engine: ScoringEngine, identity: Identity, secrets: () => readonly string[], encoder?: SentenceEncoder, metricsSecrets?: () => readonly string[] | undefined): Hono {
  const app = new Hono();
  const timed = common(app, engine, identity, secrets, metricsSecrets);

  app.post(RUNTIME_PATHS.tokenize, async (c) => {
    const body = await readJson(c, TokenizeRequest, RUNTIME_BODY);
    const response: TokenizeResponse = {
      release_id: identity.release_id,
      fingerprint: identity.fingerprint,
      max_tokens_per_pass: identity.max_tokens_per_pass,
      results: body.texts.map(({ text, special }) => engine.tokenize(text, special)),
    };
    return c.json(response);
  });

  app.post(RUNTIME_PATHS.score, async (c) => {
    const body = await readJson(c, ScoreRequest, RUNTIME_BODY);
    const result = await timed("score", () => engine.score(body.segments, body.label_tokens, { hiddenState: body.hidden_state, prefixSegments: body.prefix_segments, pooledState: body.pooled_state, prefixOwner: body.prefix_owner })).catch((err: unknown) => {
      if (err instanceof ServiceError) throw err;
      // An engine failure's message names no prompt content; operators need it.
      throw new ServiceError("internal_error", "the engine failed to evaluate the request", `engine failed: ${err instanceof Error ? err.message : String(err)}`);
    });
    const response: ScoreResponse = {
      release_id: identity.release_id,
      fingerprint: identity.fingerprint,
      prompt_tokens: result.promptTokens,
      prefix_tokens: result.prefixTokens,
      evaluated_tokens: result.evaluatedTokens,
      logprobs: result.logprobs,
      ...(body.hidden_state ? { hidden_state: result.hiddenState } : {}),
      ...(body.pooled_state ? { pooled_state: result.pooledState } : {}),
    };
    return c.json(response);
  });

  if (encoder && identity.encoder) {
    const encoderFingerprint = identity.encoder.fingerprint;
    app.post(RUNTIME_PATHS.embed, async (c) => {
      const body = await readJson(c, EmbedRequest, RUNTIME_BODY);
      const result = await timed("embed", () => encoder.embed(body.text)).catch((err: unknown) => {
        throw new ServiceError("internal_error", "the encoder failed to embed the text", `encoder failed: ${err instanceof Error ? err.message : String(err)}`);
      });
      const response: EmbedResponse = { release_id: identity.release_id, fingerprint: identity.fingerprint, encoder: encoderFingerprint, tokens: result.tokens, embedding: result.embedding };
      return c.json(response);
    });
  }

  return app;
}

/** An image runtime: identity, stats and image-features (the canonical PNG read through its grant). */
export function createImageRuntimeApp(engine: ImageEngine, identity: Identity, secrets: () => readonly string[], metricsSecrets?: () => readonly string[] | undefined): Hono {
  const app = new Hono();
  const timed = common(app, engine, identity, secrets, metricsSecrets);

  app.post(RUNTIME_PATHS.imageFeatures, async (c) => {
    const body = await readJson(c, ImageFeaturesRequest, RUNTIME_BODY);
    engine.visualTokens(); // 413 before the read: every image costs the same tokens
    const png = await readGranted(body.image, { bytes: body.bytes, sha256: body.sha256 }, "the canonical image").catch((err: unknown) => {
      throw new ServiceError("bad_gateway", "the image could not be read from storage", `image read failed: ${err instanceof Error ? err.message : String(err)}`);
    });
    const result = await timed("image_features", () => engine.features(png)).catch((err: unknown) => {
      if (err instanceof ServiceError) throw err;
      throw new ServiceError("internal_error", "the engine failed to evaluate the image", `engine failed: ${err instanceof Error ? err.message : String(err)}`);
    });
    const response: ImageFeaturesResponse = {
      release_id: identity.release_id,
      fingerprint: identity.fingerprint,
      visual_tokens: result.visualTokens,
      input_pixels: result.inputPixels,
      features: result.features,
    };
    return c.json(response);
  });

  return app;
}

type Timed = <T>(call: string, work: () => Promise<T>) => Promise<T>;

/**
 * What both kinds of runtime share: /metrics (registered first, so the runtime secret's middleware
 * after it does not apply to it), the runtime secret on everything else, identity and stats, the
 * error renderer. Returns the timer the evaluation routes wrap their call in.
 */
function common(
  app: Hono,
  engine: { stats(): { passes: number; evaluatedTokens: number; busyMs: number } },
  identity: Identity,
  secrets: () => readonly string[],
  metricsSecrets: (() => readonly string[] | undefined) | undefined,
): Timed {
  const metrics = new Metrics();
  metrics.counterFrom("svc_runtime_passes_total", "Passes the engine evaluated.", () => [{ labels: {}, value: engine.stats().passes }]);
  metrics.counterFrom("svc_runtime_evaluated_tokens_total", "Tokens the engine evaluated (a kept prefix's tokens are not counted again).", () => [{ labels: {}, value: engine.stats().evaluatedTokens }]);
  metrics.counterFrom("svc_runtime_busy_seconds_total", "Seconds the engine spent evaluating; its rate is the runtime's busy share.", () => [{ labels: {}, value: engine.stats().busyMs / 1000 }]);
  const durations = metrics.histogram("svc_runtime_pass_duration_seconds", "One evaluation call (score, embed, image_features) from its arrival to its answer.", ["call"]);
  const errors = metrics.counter("svc_runtime_errors_total", "Errors this runtime answered, by stable code.", ["code"]);
  if (metricsSecrets) app.get(METRICS_PATH, metricsHandler(metrics, metricsSecrets));
  app.use("*", sharedSecret(secrets, "runtime"));
  app.notFound(notFound);
  app.onError(errorRenderer("runtime", (code) => errors.inc({ code })));
  app.get(RUNTIME_PATHS.identity, (c) => c.json(identity));
  app.get(RUNTIME_PATHS.stats, (c) => {
    const { passes, evaluatedTokens, busyMs } = engine.stats();
    return c.json({ passes, evaluated_tokens: evaluatedTokens, busy_ms: busyMs } satisfies Stats);
  });
  return async (call, work) => {
    const started = performance.now();
    try {
      return await work();
    } finally {
      durations.observe({ call }, (performance.now() - started) / 1000);
    }
  };
}
