/**
 * The runtime's HTTP face (runs in the runtime process on the GPU host): the three calls of
 * contract/runtime-protocol.ts behind a bearer secret, with the gateway's error envelope.
 *
 * Nothing here logs a request body or a header: prompts are customer data and the secret is a secret.
 */
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { bearerToken, secretsEqual } from "../contract/crypto.ts";
import { ServiceError, errorBody } from "../contract/errors.ts";
import { RUNTIME_PATHS, ScoreRequest, TokenizeRequest, type Identity, type ScoreResponse } from "../contract/runtime-protocol.ts";
import type { ScoringEngine } from "./engine.ts";

export function createRuntimeApp(engine: ScoringEngine, identity: Identity, secret: string): Hono {
  if (secret === "") throw new Error("the runtime secret must not be empty");
  const app = new Hono();

  app.use("*", async (c, next) => {
    const presented = bearerToken(c.req.header("authorization"));
    if (presented === null || !(await secretsEqual(presented, secret))) {
      return c.json(errorBody("unauthorized", "missing or wrong runtime secret"), 401);
    }
    await next();
  });

  app.get(RUNTIME_PATHS.identity, (c) => c.json(identity));

  app.post(RUNTIME_PATHS.tokenize, async (c) => {
    const body = await parseBody(c, TokenizeRequest);
    return c.json(engine.tokenize(body.text, body.special));
  });

  app.post(RUNTIME_PATHS.score, async (c) => {
    const body = await parseBody(c, ScoreRequest);
    const result = await engine.score(body.segments, body.label_tokens);
    const response: ScoreResponse = {
      release_id: identity.release_id,
      fingerprint: identity.fingerprint,
      prompt_tokens: result.promptTokens,
      logprobs: result.logprobs,
    };
    return c.json(response);
  });

  app.notFound((c) => c.json(errorBody("not_found", `no route ${c.req.method} ${c.req.path}`), 404));

  app.onError((err, c) => {
    if (err instanceof ServiceError) return c.json(err.toBody(), err.status as ContentfulStatusCode);
    // The message of an engine failure names no prompt content; the stack stays out of the log.
    console.error(`runtime: ${c.req.method} ${c.req.path} failed: ${err.message}`);
    return c.json(errorBody("internal_error", "the engine failed to evaluate the request"), 500);
  });

  return app;
}

async function parseBody<T extends z.ZodType>(c: Context, schema: T): Promise<z.infer<T>> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    throw new ServiceError("invalid_request", "body is not valid JSON");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "body"}: ${issue.message}`);
    throw new ServiceError("invalid_request", problems.join("; "));
  }
  return parsed.data;
}
