/**
 * Security tests shared by every authenticated route: each route file calls one of these, so a new
 * route gets missing, malformed, wrong, revoked, disabled-account, wrong-kind and service-credential
 * checks by one line.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { setStatus } from "../../ops/accounts.ts";
import { call, createKey, newAccount, signIn, stack, withDb, type Reply } from "./api.ts";

export interface Route {
  method: "GET" | "POST";
  path: string;
  body?: unknown;
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
      const reply = await send(resolve(), account.key.secret);
      expect(reply.status).not.toBe(401);
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
      expect((await send(resolve(), key.secret)).status).not.toBe(401);
      expect((await call(`/v1/keys/${key.id}/revoke`, { token: account.userToken, body: {} })).status).toBe(200);
      expectError(await send(resolve(), key.secret), 401, "revoked_key");
    });

    it("refuses every key of a disabled account on its very next request, and accepts them again once enabled", async () => {
      const other = await newAccount();
      expect((await send(resolve(), other.key.secret)).status).not.toBe(401);
      await withDb((db) => setStatus(db, other.accountId, "disabled"));
      expectError(await send(resolve(), other.key.secret), 401, "account_disabled");
      await withDb((db) => setStatus(db, other.accountId, "active"));
      expect((await send(resolve(), other.key.secret)).status).not.toBe(401);
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
