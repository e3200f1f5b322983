/**
 * The edge Worker's Hono app (runs in workerd). Routes are registered here, in one place; the
 * conventions every response shares (request id header, error envelope, the one allowed browser
 * origin) are applied here too.
 */
import { Hono } from "hono";
import { cors } from "hono/cors";
import { REQUEST_ID_HEADER } from "../contract/limits.ts";
import { errorRenderer, notFound } from "../server-shared/http.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import type { AppEnv } from "./env.ts";
import { batches } from "./routes/batches.ts";
import { decisions } from "./routes/decisions.ts";
import { health } from "./routes/health.ts";
import { internal } from "./routes/internal.ts";
import { keys } from "./routes/keys.ts";
import { models } from "./routes/models.ts";
import { reference } from "./routes/reference.ts";
import { signIn } from "./routes/sign-in.ts";
import { storage } from "./routes/storage.ts";
import { services } from "./services.ts";

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    const requestId = `req_${crypto.randomUUID().replaceAll("-", "")}`;
    c.set("requestId", requestId);
    const timings = new Timings();
    c.set("timings", timings);
    await next();
    c.res.headers.set(REQUEST_ID_HEADER, requestId);
    // The hops this request went through (edge and sidecar), names and milliseconds only.
    const header = timings.header();
    if (header) c.res.headers.set(SERVER_TIMING_HEADER, header);
  });

  app.use(
    cors({
      origin: (origin, c) => {
        const allowed = services(c.env).settings.ALLOWED_ORIGIN;
        return allowed && origin === allowed ? origin : null;
      },
      allowMethods: ["GET", "POST", "PUT", "OPTIONS"],
      allowHeaders: ["authorization", "content-type", "if-none-match", "x-typesafe-sdk", "x-typesafe-runtime", "x-typesafe-retry-count"],
      exposeHeaders: [REQUEST_ID_HEADER, "retry-after", "retry-after-ms", SERVER_TIMING_HEADER],
      maxAge: 600,
    }),
  );

  // Unauthenticated and free of I/O: what a client can reach when nothing else answers.
  app.get("/", (c) => c.json({ service: "decision-service", api: "/v1" }));
  app.route("/", health);
  app.route("/", reference);
  app.route("/", signIn);
  app.route("/", keys);
  app.route("/", models);
  app.route("/", decisions);
  app.route("/", batches);
  app.route("/", storage);
  app.route("/", internal);

  app.notFound(notFound);
  app.onError(errorRenderer("edge"));
  return app;
}
