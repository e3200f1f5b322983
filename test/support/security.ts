/**
 * Security tests shared by every authenticated route: each route file calls one of these, so a new
 * route gets missing, malformed, wrong, revoked, disabled-account, wrong-kind and service-credential
 * checks by one line. Each refusal is measured against the route's own answer to a good credential
 * (`ok`), so a route that answers 500 to everyone fails here rather than passing every refusal.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { setStatus } from "../../ops/accounts.ts";
import { call, createKey, newAccount, signIn, stack, withDb, type Reply } from "./api.ts";

export interface Route {
  method: "GET" | "POST";
  path: string;
  body?: unknown;
  /**
   * What a fresh account's good credential is answered: 200 when absent; e.g. 201 for a create, or
   * 404 for a route about one resource that is another account's (the route ran, and said so).
   */
  ok?: number | readonly number[];
}

/** The route answered the good credential as it should: it ran, past authentication. */
function expectAccepted(reply: Reply, route: Route): void {
  const ok = [route.ok ?? 200].flat();
  expect(ok, `${route.method} ${route.path} answered ${reply.status}: ${JSON.stringify(reply.body)}`).toContain(reply.status);
}

export function expectError(reply: Reply, status: number, code: string): void {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  const envelope = ErrorEnvelope.parse(reply.body);
  expect(envelope.error).toMatchObject({ code, status });
  expect(envelope.error.message.length).toBeGreaterThan(0);
  expect(reply.requestId).toMatch(/^req_/);
}

function send(route: Route, token?: string): Promise<Reply> {
  return call(route.path, { method: route.method, token, body: route.body });
}

/** The service's own secrets: never accepted from a client. */
function serviceCredentials(): Array<[string, string]> {
  const s = stack().secrets;
  return [
    ["sidecar secret", s.sidecar],
    ["runtime secret", s.runtime],
    ["upstash token", s.upstash],
  ];
}

export function apiKeyRouteSecurity(route: Route | (() => Route)): void {
  const resolve = () => (typeof route === "function" ? route() : route);
  describe("API-key authentication", () => {
    let account: Awaited<ReturnType<typeof newAccount>>;
    beforeAll(async () => {
      account = await newAccount();
    });

    it("accepts the account's key (the baseline the refusals below are measured against)", async () => {
      expectAccepted(await send(resolve(), account.key.secret), resolve());
    });

    it("refuses a missing credential", async () => {
      expectError(await send(resolve()), 401, "missing_credentials");
      const basic = await call(resolve().path, { method: resolve().method, body: resolve().body, headers: { authorization: "Basic dXNlcjpwYXNz" } });
      expectError(basic, 401, "missing_credentials");
    });

    it("refuses a malformed key", async () => {
      expectError(await send(resolve(), "svc_not-a-key"), 401, "invalid_credentials");
    });

    it("refuses the right key id with a wrong secret, and an unknown key id", async () => {
      const secret = account.key.secret;
      const flipped = secret.slice(0, -1) + (secret.endsWith("A") ? "B" : "A");
      expectError(await send(resolve(), flipped), 401, "invalid_credentials");
      const unknown = `svc_${"a".repeat(26)}_${secret.slice(-43)}`;
      expectError(await send(resolve(), unknown), 401, "invalid_credentials");
    });

    it("refuses a revoked key on its very next request", async () => {
      const key = await createKey(account.userToken, "to revoke");
      expectAccepted(await send(resolve(), key.secret), resolve());
      expect((await call(`/v1/keys/${key.id}/revoke`, { token: account.userToken, body: {} })).status).toBe(200);
      expectError(await send(resolve(), key.secret), 401, "revoked_key");
    });

    it("refuses every key of a disabled account on its very next request, and accepts them again once enabled", async () => {
      const other = await newAccount();
      expectAccepted(await send(resolve(), other.key.secret), resolve());
      await withDb((db) => setStatus(db, other.accountId, "disabled"));
      expectError(await send(resolve(), other.key.secret), 401, "account_disabled");
      await withDb((db) => setStatus(db, other.accountId, "active"));
      expectAccepted(await send(resolve(), other.key.secret), resolve());
    });

    it("refuses a user access token", async () => {
      expectError(await send(resolve(), account.userToken), 401, "wrong_credential_kind");
    });

    it("refuses the service's own credentials", async () => {
      for (const [, secret] of serviceCredentials()) expectError(await send(resolve(), secret), 401, "invalid_credentials");
    });
  });
}

export function userRouteSecurity(route: Route | (() => Route)): void {
  const resolve = () => (typeof route === "function" ? route() : route);
  describe("user-token authentication", () => {
    let user: { token: string };
    beforeAll(async () => {
      user = await signIn();
    });

    it("accepts a signed-in user's token (the baseline the refusals below are measured against)", async () => {
      expectAccepted(await send(resolve(), user.token), resolve());
    });

    it("refuses a missing credential", async () => {
      expectError(await send(resolve()), 401, "missing_credentials");
    });

    it("refuses a malformed token and a token with a forged signature", async () => {
      expectError(await send(resolve(), "not-a-token"), 401, "invalid_credentials");
      const [header, payload] = user.token.split(".");
      const forged = `${header}.${payload}.${"A".repeat(86)}`;
      expectError(await send(resolve(), forged), 401, "invalid_credentials");
    });

    it("refuses a token whose claims were altered", async () => {
      const [header, payload, signature] = user.token.split(".") as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
      const altered = Buffer.from(JSON.stringify({ ...claims, sub: "someone-else" })).toString("base64url");
      expectError(await send(resolve(), `${header}.${altered}.${signature}`), 401, "invalid_credentials");
    });

    it("refuses an API key", async () => {
      const account = await newAccount();
      expectError(await send(resolve(), account.key.secret), 401, "wrong_credential_kind");
    });

    it("refuses the service's own credentials", async () => {
      for (const [, secret] of serviceCredentials()) expectError(await send(resolve(), secret), 401, "invalid_credentials");
    });
  });
}

/**
 * The routes that take the owner's API key or a signed-in user's token (edge/auth/image.ts): both are
 * accepted; every refusal of either kind is the one its own routes give.
 */
export function keyOrUserRouteSecurity(route: Route | (() => Route)): void {
  const resolve = () => (typeof route === "function" ? route() : route);
  describe("API-key or user-token authentication", () => {
    let account: Awaited<ReturnType<typeof newAccount>>;
    beforeAll(async () => {
      account = await newAccount();
    });

    it("accepts the account's key and its user's token (the baselines the refusals below are measured against)", async () => {
      expectAccepted(await send(resolve(), account.key.secret), resolve());
      expectAccepted(await send(resolve(), account.userToken), resolve());
    });

    it("refuses a missing credential, a malformed one, a wrong key secret and an unknown key id", async () => {
      expectError(await send(resolve()), 401, "missing_credentials");
      expectError(await send(resolve(), "svc_not-a-key"), 401, "invalid_credentials");
      const secret = account.key.secret;
      expectError(await send(resolve(), secret.slice(0, -1) + (secret.endsWith("A") ? "B" : "A")), 401, "invalid_credentials");
      expectError(await send(resolve(), `svc_${"a".repeat(26)}_${secret.slice(-43)}`), 401, "invalid_credentials");
    });

    it("refuses a revoked key on its very next request", async () => {
      const key = await createKey(account.userToken, "to revoke");
      expectAccepted(await send(resolve(), key.secret), resolve());
      expect((await call(`/v1/keys/${key.id}/revoke`, { token: account.userToken, body: {} })).status).toBe(200);
      expectError(await send(resolve(), key.secret), 401, "revoked_key");
    });

    it("refuses a disabled account's key and its user's token alike, and accepts both again once enabled", async () => {
      const other = await newAccount();
      await withDb((db) => setStatus(db, other.accountId, "disabled"));
      expectError(await send(resolve(), other.key.secret), 401, "account_disabled");
      expectError(await send(resolve(), other.userToken), 401, "account_disabled");
      await withDb((db) => setStatus(db, other.accountId, "active"));
      expectAccepted(await send(resolve(), other.key.secret), resolve());
      expectAccepted(await send(resolve(), other.userToken), resolve());
    });

    it("refuses the service's own credentials", async () => {
      for (const [, secret] of serviceCredentials()) expectError(await send(resolve(), secret), 401, "invalid_credentials");
    });
  });
}
