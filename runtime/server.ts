/**
 * The runtime's HTTP face (runs in the runtime process on the GPU host): the calls of
 * server-shared/runtime-protocol.ts behind a bearer secret, with the gateway's error envelope. A text
 * runtime (createRuntimeApp) answers tokenize, score and score-group (and embed, with a sentence encoder), an image runtime (createImageRuntimeApp)
 * image-features; both answer identity and stats.
 *
 * Both serve Prometheus metrics at GET /metrics to a bearer of METRICS_SECRET (`metricsSecrets`; no
 * route where it is unset), outside the runtime secret, so a scraper holds no secret that scores:
 *
 *   svc_runtime_passes_total                   counter: passes evaluated
 *   svc_runtime_evaluated_tokens_total         counter: tokens evaluated (a kept prefix's are not counted again)
 *   svc_runtime_busy_seconds_total             counter: time the engine spent evaluating; rate() is its busy share
 *   svc_runtime_pass_duration_seconds{call}    histogram: one evaluation call (score, score_group, embed, image_features), as answered
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
  ScoreGroupRequest,
  ScoreRequest,
  TokenizeRequest,
  type PassResult,
  type ScoreGroupResponse,
  type EmbedResponse,
  type Identity,
  type ImageFeaturesResponse,
  type ScoreResponse,
  type Stats,
  type TokenizeResponse,
} from "../server-shared/runtime-protocol.ts";
import type { ScoreResult, ScoringEngine } from "./engine.ts";
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
    const result = await timed("score", () => engine.score(body.segments, body.label_tokens, { hiddenState: body.hidden_state, prefixSegments: body.prefix_segments, pooledState: body.pooled_state, prefixOwner: body.prefix_owner })).catch(engineFailure);
    const response: ScoreResponse = { release_id: identity.release_id, fingerprint: identity.fingerprint, ...passResult(body, result) };
    return c.json(response);
  });

  app.post(RUNTIME_PATHS.scoreGroup, async (c) => {
    const body = await readJson(c, ScoreGroupRequest, RUNTIME_BODY);
    const passes = body.passes.map((pass) => ({
      segments: pass.segments,
      labelTokens: pass.label_tokens,
      options: { hiddenState: pass.hidden_state, prefixSegments: pass.prefix_segments, pooledState: pass.pooled_state, prefixOwner: pass.prefix_owner },
    }));
    const results = await timed("score_group", () => engine.scoreGroup(passes, body.realtime)).catch(engineFailure);
    const response: ScoreGroupResponse = { release_id: identity.release_id, fingerprint: identity.fingerprint, results: results.map((result, i) => passResult(body.passes[i]!, result)) };
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

/** A pass's answer on the wire (its hidden and pooled states where it asked for them). */
function passResult(pass: { hidden_state: boolean; pooled_state: boolean }, result: ScoreResult): PassResult {
  return {
    prompt_tokens: result.promptTokens,
    prefix_tokens: result.prefixTokens,
    evaluated_tokens: result.evaluatedTokens,
    logprobs: result.logprobs,
    ...(pass.hidden_state ? { hidden_state: result.hiddenState } : {}),
    ...(pass.pooled_state ? { pooled_state: result.pooledState } : {}),
  };
}

/** An engine's failure as the envelope's 500 (a refusal of the request stays as it is); its message names no prompt content, and operators need it. */
function engineFailure(err: unknown): never {
  if (err instanceof ServiceError) throw err;
  throw new ServiceError("internal_error", "the engine failed to evaluate the request", `engine failed: ${err instanceof Error ? err.message : String(err)}`);
}
