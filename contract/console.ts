/**
 * The web console's settings on the wire: `GET /console/config.json`, served by the edge, read by the
 * page (console/) before anything else. Unauthenticated; it publishes only what the provider's own
 * discovery document and a public client already reveal.
 *
 *     { "issuer": "https://login.example.com", "client_id": "svc-console", "scope": "openid keys",
 *       "images": { "api": false, "browser": true } }
 */
import { z } from "zod";

export const CONSOLE_PATH = "/console";
export const CONSOLE_CONFIG_PATH = "/console/config.json";
/** Beside the built files: the CSP hashes of the inline style elements the built page renders (a JSON array). */
export const CONSOLE_STYLE_HASHES_FILE = "style-hashes.json";

export const ConsoleConfig = z.object({
  /** The identity provider the page signs in with (authorization code + PKCE, a public client). */
  issuer: z.string(),
  /** The provider's public client for the console; null when the deployment names none (sign-in is then unavailable). */
  client_id: z.string().nullable(),
  scope: z.string(),
  /** Which image routes this deployment has (IMAGE_API, IMAGE_BROWSER). */
  images: z.object({ api: z.boolean(), browser: z.boolean() }),
});
export type ConsoleConfig = z.infer<typeof ConsoleConfig>;
