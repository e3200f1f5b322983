/**
 * Who may use the image routes (runs in workerd): the owner's API key when IMAGE_API is on, a
 * signed-in user's access token (the browser's session) when IMAGE_BROWSER is on. With both off
 * every image route answers the 404 of a route that does not exist; with one off, its credential is
 * told which one this deployment takes. Sets `accountId`, the account the assets belong to; a
 * signed-in user with no account yet gets one, as the first key would make it.
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { parseApiKey } from "../../contract/keys.ts";
import { bearerToken } from "../../server-shared/crypto.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { notFound } from "../../server-shared/http.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";
import { presentedKey, verifyKey } from "./api-key.ts";
import { userAccountWithSettings } from "../accounts.ts";
import { verifiedUser } from "./user.ts";

/** The routes that exist only where IMAGE_BROWSER is on (a signed-in session's). */
export const IMAGE_SESSION_PATHS: readonly string[] = ["/v1/image-models", "/v1/image-decisions"];

/** Whether any image route exists on this deployment. */
export function imageRoutesEnabled(c: Context<AppEnv>): boolean {
  const { IMAGE_API, IMAGE_BROWSER } = services(c.env).settings;
  return IMAGE_API === "on" || IMAGE_BROWSER === "on";
}

export const imageAuth = createMiddleware<AppEnv>(async (c, next) => {
  if (!imageRoutesEnabled(c)) return notFound(c);
  const { IMAGE_API, IMAGE_BROWSER } = services(c.env).settings;
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ServiceError("missing_credentials", "missing credentials: send Authorization: Bearer <API key or signed-in access token>");
  if (parseApiKey(token)) {
    if (IMAGE_API !== "on") throw new ServiceError("wrong_credential_kind", "this deployment takes image requests from a signed-in session only, not an API key");
    await verifyKey(c, presentedKey(c));
    c.set("accountId", c.get("account").id);
  } else {
    if (IMAGE_BROWSER !== "on") throw new ServiceError("wrong_credential_kind", "this deployment takes image requests with the owner's API key only");
    await signedInAccount(c, token);
  }
  await next();
});

/**
 * The session-only image routes (GET /v1/image-models, POST /v1/image-decisions): a signed-in user's
 * access token, where IMAGE_BROWSER is on; absent (404) otherwise, and an API key is refused.
 */
export const imageSession = createMiddleware<AppEnv>(async (c, next) => {
  if (services(c.env).settings.IMAGE_BROWSER !== "on") return notFound(c);
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ServiceError("missing_credentials", "missing user access token: sign in and send Authorization: Bearer <token>");
  if (parseApiKey(token)) throw new ServiceError("wrong_credential_kind", "this route takes a signed-in user's access token only, not an API key");
  await signedInAccount(c, token);
  await next();
});

/**
 * Sets `user`, `account` (with its quota settings, as an API key sets it) and `accountId` from a
 * signed-in user's token; the account is made on first use, as a first key makes it.
 */
async function signedInAccount(c: Context<AppEnv>, token: string): Promise<void> {
  const user = await verifiedUser(c, token);
  const account = await userAccountWithSettings(c, { create: true, user });
  c.set("user", user);
  c.set("account", account);
  c.set("accountId", account.id);
}
