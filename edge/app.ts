/**
 * The edge Worker's Hono app (runs in workerd). Routes are registered here, in one place; the
 * conventions every response shares (request id header, error envelope, the one allowed browser
 * origin) are applied here too.
 */
import { Hono, type NotFoundHandler } from "hono";
import { cors } from "hono/cors";
import { errorBody } from "../contract/errors.ts";
import { REQUEST_ID_HEADER } from "../contract/limits.ts";
import { discardBody } from "../server-shared/body.ts";
import { errorRenderer, notFound } from "../server-shared/http.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import type { AppEnv } from "./env.ts";
import { batches } from "./routes/batches.ts";
import { consolePage } from "./routes/console.ts";
import { decisions } from "./routes/decisions.ts";
import { health } from "./routes/health.ts";
import { credit } from "./routes/credit.ts";
import { imageAssets } from "./routes/image-assets.ts";
import { imageDecisions } from "./routes/image-decisions.ts";
import { imageModels } from "./routes/image-models.ts";
import { internal } from "./routes/internal.ts";
import { keys } from "./routes/keys.ts";
import { webhooks } from "./routes/webhooks.ts";
import { usage } from "./routes/usage.ts";
import { models } from "./routes/models.ts";
import { reference } from "./routes/reference.ts";
import { signIn } from "./routes/sign-in.ts";
import { storage } from "./routes/storage.ts";
import { trainings } from "./routes/trainings.ts";
import { IMAGE_SESSION_PATHS, imageRoutesEnabled } from "./auth/image.ts";
import { services } from "./services.ts";

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    const requestId = `req_${crypto.randomUUID().replaceAll("-", "")}`;
    c.set("requestId", requestId);
    const timings = new Timings();
    c.set("timings", timings);
    await next();
    // A request body left unread ends the client's keep-alive connection under Miniflare (see there).
    await discardBody(c.req.raw);
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
      allowHeaders: ["authorization", "content-type", "if-none-match", "x-amz-checksum-sha256", "x-typesafe-sdk", "x-typesafe-runtime", "x-typesafe-retry-count"],
      exposeHeaders: [REQUEST_ID_HEADER, "retry-after", "retry-after-ms", SERVER_TIMING_HEADER],
      maxAge: 600,
    }),
  );

  // Unauthenticated and free of I/O: what a client can reach when nothing else answers.
  app.get("/", (c) => c.json({ service: "decision-service", api: "/v1" }));
  app.route("/", health);
  app.route("/", reference);
  app.route("/", consolePage);
  app.route("/", signIn);
  app.route("/", keys);
  app.route("/", usage);
  app.route("/", webhooks);
  app.route("/", models);
  app.route("/", decisions);
  app.route("/", batches);
  app.route("/", trainings);
  app.route("/", imageAssets);
  app.route("/", imageDecisions);
  app.route("/", imageModels);
  app.route("/", credit);
  app.route("/", storage);
  app.route("/", internal);

  app.notFound(notFoundOrNotAllowed(app));
  app.onError(errorRenderer("edge"));
  return app;
}

/**
 * The answer when no handler matched: 405 with `Allow` (RFC 9110) when the path is a route of the app
 * under other methods, else the 404. HEAD is served by every GET handler and OPTIONS by the CORS
 * middleware on any path, so `Allow` names them too. With the image flags off, the image routes are
 * not routes of the app.
 */
function notFoundOrNotAllowed(app: Hono<AppEnv>): NotFoundHandler<AppEnv> {
  let table: { pattern: RegExp; method: string; image: boolean; session: boolean }[] | undefined;
  return (c) => {
    table ??= app.routes
      .filter((route) => route.method !== "ALL")
      .map((route) => ({
        pattern: routePattern(route.path),
        method: route.method,
        image: route.path.startsWith("/v1/image-"),
        session: IMAGE_SESSION_PATHS.includes(route.path),
      }));
    const images = imageRoutesEnabled(c);
    const browser = services(c.env).settings.IMAGE_BROWSER === "on";
    const exists = (route: { image: boolean; session: boolean }) => (route.session ? browser : images || !route.image);
    const methods = new Set(table.filter((route) => exists(route) && route.pattern.test(c.req.path)).map((route) => route.method));
    if (methods.size === 0) return notFound(c);
    if (methods.has("GET")) methods.add("HEAD");
    methods.add("OPTIONS");
    const allow = [...methods].join(", ");
    c.header("allow", allow);
    // Neither the method nor the path is echoed: both are the client's, of any length.
    return c.json(errorBody("method_not_allowed", `this route does not take that method; allowed: ${allow}`), 405);
  };
}

/** A Hono route path (`/v1/batches/:id/submit`, `/storage/*`) as a regular expression over request paths. */
function routePattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((part) => (part === "*" ? ".*" : part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}$`);
}
