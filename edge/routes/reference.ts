/**
 * The API's own reference (runs in workerd), without credentials and free of I/O:
 *
 *   GET /v1/openapi.json  -> the OpenAPI 3.1 document generated from the contract (contract/openapi.ts)
 *   GET /docs             -> a page that renders it; its script and stylesheet are served here too
 *
 * The page's policy allows only this origin's own files, so it works offline and no injected markup
 * could load or run anything else. Browser access (CORS) is the app's one allowed origin, as for
 * every route.
 */
import { Hono } from "hono";
import { DOCS_PATH, OPENAPI_PATH, openApiDocument } from "../../contract/openapi.ts";
import { imageRoutesEnabled } from "../auth/image.ts";
import type { AppEnv } from "../env.ts";
import { REFERENCE_ASSETS, REFERENCE_CSS, REFERENCE_JS, referenceHtml } from "./reference-page.ts";

export const reference = new Hono<AppEnv>();

/** The document changes only with a deployment; a few minutes of caching is harmless. */
const CACHE = "public, max-age=300";
const PAGE_POLICY = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const PAGE_HEADERS = {
  "cache-control": CACHE,
  "content-security-policy": PAGE_POLICY,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

reference.get(OPENAPI_PATH, (c) => {
  c.header("cache-control", CACHE);
  c.header("x-content-type-options", "nosniff");
  return c.json(openApiDocument({ images: imageRoutesEnabled(c) }));
});

reference.get(DOCS_PATH, (c) => c.body(referenceHtml(OPENAPI_PATH), 200, { ...PAGE_HEADERS, "content-type": "text/html; charset=utf-8" }));

reference.get(REFERENCE_ASSETS.script, (c) => c.body(REFERENCE_JS, 200, { ...PAGE_HEADERS, "content-type": "text/javascript; charset=utf-8" }));

reference.get(REFERENCE_ASSETS.style, (c) => c.body(REFERENCE_CSS, 200, { ...PAGE_HEADERS, "content-type": "text/css; charset=utf-8" }));
