/**
 * The web console (runs in workerd): its static files, built from console/ into the Worker's assets
 * (wrangler.toml `[assets]`, ops/console-bundle.ts), served under /console by this Worker, which runs
 * before the assets so that every file carries the page's policy:
 *
 *   GET /console/config.json  -> where the page signs in (contract/console.ts)
 *   GET /console/<file>       -> a built file (script, styles)
 *   GET /console, /console/…  -> the page itself (it routes in the browser)
 *
 * The policy allows this origin's own files and calls, calls to the identity provider (the token
 * exchange of the sign-in) and to R2 where uploads go there directly, and exactly the inline style
 * elements the built components render (by hash): nothing else loads or runs, so the console works
 * offline on the local stack.
 */
import { Hono, type Context } from "hono";
import { z } from "zod";
import { CONSOLE_CONFIG_PATH, CONSOLE_PATH, CONSOLE_STYLE_HASHES_FILE, type ConsoleConfig } from "../../contract/console.ts";
import { USER_SIGN_IN_SCOPE } from "../../contract/keys.ts";
import { notFound } from "../../server-shared/http.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const consolePage = new Hono<AppEnv>();

/** A built file's name: hashed by the bundler, so it may be cached for good. */
const BUILT_FILE = /^\/[A-Za-z0-9_-]+\.(js|css|svg|png|woff2?)$/;

/** The built page's inline style hashes (ops/console-bundle.ts), read once per isolate. */
let styleHashes: Promise<string[]> | null = null;

async function inlineStyles(assets: Fetcher, url: string): Promise<string[]> {
  styleHashes ??= assets.fetch(new URL(`/${CONSOLE_STYLE_HASHES_FILE}`, url)).then(async (res) => {
    if (!res.ok) throw new Error(`the console's style hashes answered ${res.status}`);
    return z.array(z.string().regex(/^'sha256-[A-Za-z0-9+/=]+'$/)).parse(await res.json());
  });
  try {
    return await styleHashes;
  } catch {
    // Read again next time; meanwhile the page's inline styles are refused (scrollbars show), nothing else.
    styleHashes = null;
    return [];
  }
}

/** The origin of a setting's URL, or nothing (a bad URL is reported by the settings' own check). */
function originOf(url: string | undefined): string {
  try {
    return url ? ` ${new URL(url).origin}` : "";
  } catch {
    return "";
  }
}

/**
 * The page's policy. Its calls go to this origin, the identity provider (the sign-in's token call)
 * and, where uploads go straight to R2 (STORAGE_ENDPOINT), that endpoint (a batch file's signed PUT).
 */
function policy(settings: { OIDC_ISSUER: string; STORAGE_ENDPOINT?: string | undefined }, styles: string[]): string {
  const elsewhere = `${originOf(settings.OIDC_ISSUER)}${originOf(settings.STORAGE_ENDPOINT)}`;
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self'${styles.map((hash) => ` ${hash}`).join("")}`,
    "img-src 'self' data: blob:",
    "font-src 'self'",
    `connect-src 'self'${elsewhere}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

async function withPolicy(c: Context<AppEnv>, assets: Fetcher, res: Response, cache: string): Promise<Response> {
  const headers = new Headers(res.headers);
  headers.set("content-security-policy", policy(services(c.env).settings, await inlineStyles(assets, c.req.url)));
  headers.set("x-content-type-options", "nosniff");
  headers.set("x-frame-options", "DENY");
  headers.set("referrer-policy", "no-referrer");
  headers.set("cache-control", cache);
  return new Response(res.body, { status: res.status, headers });
}

consolePage.get(CONSOLE_CONFIG_PATH, (c) => {
  const { settings } = services(c.env);
  const config: ConsoleConfig = {
    issuer: settings.OIDC_ISSUER,
    client_id: settings.OIDC_CONSOLE_CLIENT_ID ?? null,
    scope: USER_SIGN_IN_SCOPE,
    images: { api: settings.IMAGE_API === "on", browser: settings.IMAGE_BROWSER === "on" },
  };
  c.header("cache-control", "no-store");
  return c.json(config);
});

consolePage.get(CONSOLE_PATH, (c) => c.redirect(`${CONSOLE_PATH}/`, 308));

consolePage.get(`${CONSOLE_PATH}/*`, async (c) => {
  const assets = c.env.ASSETS;
  if (!assets) return notFound(c);
  const path = c.req.path.slice(CONSOLE_PATH.length);
  if (BUILT_FILE.test(path)) {
    const file = await assets.fetch(new URL(path, c.req.url));
    if (file.status !== 200) return notFound(c);
    return withPolicy(c, assets, file, "public, max-age=31536000, immutable");
  }
  // Any other path under /console is one of the page's own routes: the page, which routes itself.
  const page = await assets.fetch(new URL("/", c.req.url));
  if (page.status !== 200) return notFound(c);
  return withPolicy(c, assets, page, "no-cache");
});
