/**
 * The edge Worker's Hono app (runs in workerd). Routes are registered here, in one place; the
 * conventions every response shares (request id header, error envelope) are applied here too.
 */
import { Hono } from "hono";
import type { AppEnv } from "./env.ts";
import { REQUEST_ID_HEADER } from "../contract/limits.ts";
import { errorBody } from "../contract/errors.ts";
import { health } from "./routes/health.ts";

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    const requestId = `req_${crypto.randomUUID().replaceAll("-", "")}`;
    c.set("requestId", requestId);
    await next();
    c.res.headers.set(REQUEST_ID_HEADER, requestId);
  });

  app.route("/", health);

  app.notFound((c) => c.json(errorBody("not_found", `no route for ${c.req.method} ${c.req.path}`), 404));
  app.onError((err, c) => {
    // The message may quote customer input; log the request id and the error class only.
    console.error(`request ${c.get("requestId")} failed: ${err.name}`);
    return c.json(errorBody("internal_error", "internal error"), 500);
  });
  return app;
}
