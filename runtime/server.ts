/**
 * The runtime's HTTP face (runs in the runtime process on the GPU host): the calls of
 * server-shared/runtime-protocol.ts behind a bearer secret, with the gateway's error envelope. A text
 * runtime (createRuntimeApp) answers tokenize and score (and embed, with a sentence encoder), an image runtime (createImageRuntimeApp)
 * image-features; both answer identity and stats.
 *
 * Nothing here logs a request body or a header: prompts are customer data and the secret is a secret.
 */
import { Hono } from "hono";
import { readJson } from "../server-shared/body.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { errorRenderer, notFound, sharedSecret } from "../server-shared/http.ts";
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
export function createRuntimeApp(engine: ScoringEngine, identity: Identity, secrets: () => readonly string[], encoder?: SentenceEncoder): Hono {
  const app = new Hono();
  app.use("*", sharedSecret(secrets, "runtime"));
  common(app, engine, identity);

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
    const result = await engine.score(body.segments, body.label_tokens, { hiddenState: body.hidden_state, prefixSegments: body.prefix_segments, pooledState: body.pooled_state, prefixOwner: body.prefix_owner }).catch((err: unknown) => {
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
      const result = await encoder.embed(body.text).catch((err: unknown) => {
        throw new ServiceError("internal_error", "the encoder failed to embed the text", `encoder failed: ${err instanceof Error ? err.message : String(err)}`);
      });
      const response: EmbedResponse = { release_id: identity.release_id, fingerprint: identity.fingerprint, encoder: encoderFingerprint, tokens: result.tokens, embedding: result.embedding };
      return c.json(response);
    });
  }

  app.notFound(notFound);
  app.onError(errorRenderer("runtime"));
  return app;
}

/** An image runtime: identity, stats and image-features (the canonical PNG read through its grant). */
export function createImageRuntimeApp(engine: ImageEngine, identity: Identity, secrets: () => readonly string[]): Hono {
  const app = new Hono();
  app.use("*", sharedSecret(secrets, "runtime"));
  common(app, engine, identity);

  app.post(RUNTIME_PATHS.imageFeatures, async (c) => {
    const body = await readJson(c, ImageFeaturesRequest, RUNTIME_BODY);
    engine.visualTokens(); // 413 before the read: every image costs the same tokens
    const png = await readGranted(body.image, { bytes: body.bytes, sha256: body.sha256 }, "the canonical image").catch((err: unknown) => {
      throw new ServiceError("bad_gateway", "the image could not be read from storage", `image read failed: ${err instanceof Error ? err.message : String(err)}`);
    });
    const result = await engine.features(png).catch((err: unknown) => {
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

  app.notFound(notFound);
  app.onError(errorRenderer("runtime"));
  return app;
}

function common(app: Hono, engine: { stats(): { passes: number; evaluatedTokens: number; busyMs: number } }, identity: Identity): void {
  app.get(RUNTIME_PATHS.identity, (c) => c.json(identity));
  app.get(RUNTIME_PATHS.stats, (c) => {
    const { passes, evaluatedTokens, busyMs } = engine.stats();
    return c.json({ passes, evaluated_tokens: evaluatedTokens, busy_ms: busyMs } satisfies Stats);
  });
}
