/**
 * User authentication for the routes a signed-in user manages (keys, trainings; runs in workerd): an identity-provider access token,
 * verified against the provider's JWKS. An API key is refused here, as a user token is refused on
 * API-key routes.
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { bearerToken } from "../../server-shared/crypto.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { parseApiKey } from "../../contract/keys.ts";
import type { AppEnv, User } from "../env.ts";
import { services } from "../services.ts";
import { UserTokenError, verifyUserToken } from "./user-token.ts";

export const userAuth = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ServiceError("missing_credentials", "missing user access token: sign in and send Authorization: Bearer <token>");
  if (parseApiKey(token)) throw new ServiceError("wrong_credential_kind", "an API key cannot be used on this route: it takes a signed-in user's access token (svc login, or the web console)");
  c.set("user", await verifiedUser(c, token));
  await next();
});

/** The signed-in user a presented access token names; 401 when it is invalid or expired, 503 when it cannot be checked. */
export async function verifiedUser(c: Context<AppEnv>, token: string): Promise<User> {
  try {
    const user = await verifyUserToken(token, services(c.env).settings);
    return { issuer: user.issuer, subject: user.subject };
  } catch (err) {
    // The provider's keys being out of reach, or the settings missing, is the server's fault.
    if (err instanceof UserTokenError && (err.reason === "unavailable" || err.reason === "not_configured")) {
      console.error(`user token verification unavailable: ${err.reason}`);
      throw new ServiceError("unavailable", "sign-in verification is unavailable; retry shortly");
    }
    throw new ServiceError("invalid_credentials", "invalid or expired user access token");
  }
}
