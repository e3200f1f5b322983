/**
 * The local identity provider and the edge's verification of its user access tokens, together:
 * a real oidc-provider under Bun (own temp data dir, free port), tokens obtained by the real
 * authorization-code + PKCE flow over HTTP, and edge/auth/user-token.ts run under Node with jose
 * fetching the provider's real JWKS.
 *
 * The expired-token case signs a token itself with the provider's own private key from
 * idp-keys.json: it is then valid in every way but `exp`, without waiting out a real TTL.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JWKS_COOLDOWN_MS, UserTokenError, verifyUserToken, type OidcSettings } from "../edge/auth/user-token.ts";
import { CLI_CLIENT_ID, idpInfoPath, idpKeysPath, rotateIdpKeys, startIdp, SVC_API_AUDIENCE, type Idp } from "../local/idp.ts";
import { authorize, codeChallengeOf, getUserAccessToken, newCodeVerifier, redeemCode, SignInError } from "../local/user-token.ts";

const ROOT = join(import.meta.dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");

let stackDir: string;
let dataDir: string;
let idp: Idp;
/** Every token this file obtained, to prove none of them reached the provider's log. */
const issued: string[] = [];

beforeAll(async () => {
  stackDir = mkdtempSync(join(tmpdir(), "svc-idp-"));
  // The launcher's layout, so print-user-token finds this provider through SVC_STACK_DIR.
  dataDir = join(stackDir, "idp");
  idp = await startIdp({ dataDir });
});

afterAll(async () => {
  await idp?.stop();
  rmSync(stackDir, { recursive: true, force: true });
});

const settings = (): OidcSettings => ({ OIDC_ISSUER: idp.issuer, OIDC_AUDIENCE: idp.audience, OIDC_JWKS_URL: idp.jwksUrl });

async function token(login: string): Promise<string> {
  const value = await getUserAccessToken({ issuer: idp.issuer, login });
  issued.push(value);
  return value;
}

async function refusal(promise: Promise<unknown>): Promise<UserTokenError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UserTokenError);
  return err as UserTokenError;
}

async function signInRefusal(promise: Promise<unknown>): Promise<SignInError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SignInError);
  return err as SignInError;
}

/** A token like the provider's, signed with `key`, with claims overridden by `claims`. */
async function craft(key: JWK, kid: string, claims: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload = { sub: "mallory", iss: idp.issuer, aud: SVC_API_AUDIENCE, iat: now, exp: now + 3600, scope: "keys", client_id: CLI_CLIENT_ID };
  return new SignJWT({ ...payload, ...claims })
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid })
    .sign(await importJWK(key, "ES256"));
}

function signingKey(): JWK {
  const [key] = (JSON.parse(readFileSync(idpKeysPath(dataDir), "utf8")) as { keys: JWK[] }).keys;
  return key as JWK;
}

describe("local identity provider", () => {
  it("keeps its signing keys private and names itself in idp.json", async () => {
    expect(statSync(idpKeysPath(dataDir)).mode & 0o777).toBe(0o600);
    const info = JSON.parse(readFileSync(idpInfoPath(dataDir), "utf8"));
    expect(info).toEqual({ issuer: idp.issuer, jwksUrl: idp.jwksUrl, audience: SVC_API_AUDIENCE, clientId: CLI_CLIENT_ID });
    expect(idp.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const jwks = (await (await fetch(idp.jwksUrl)).json()) as { keys: JWK[] };
    expect(jwks.keys.map((k) => k.kid)).toEqual([signingKey().kid]);
    expect(jwks.keys[0]).not.toHaveProperty("d");
  });

  it("issues, by the PKCE sign-in, a one-hour JWT for svc-api whose subject is the login", async () => {
    const subjects = [];
    for (const login of ["dev-user", "alice", "bob"]) {
      const value = await token(login);
      const user = await verifyUserToken(value, settings());
      expect(user).toEqual({ subject: login, issuer: idp.issuer });
      subjects.push(user.subject);
      const claims = decodeJwt(value);
      expect(claims.aud).toBe(SVC_API_AUDIENCE);
      expect(claims.exp! - claims.iat!).toBe(3600);
      expect(decodeProtectedHeader(value)).toMatchObject({ alg: "ES256", kid: signingKey().kid });
    }
    expect(new Set(subjects).size).toBe(3);
  });

  it("refuses a token when the edge expects another audience or issuer", async () => {
    const value = await token("alice");
    const audience = await refusal(verifyUserToken(value, { ...settings(), OIDC_AUDIENCE: "other-api" }));
    expect(audience.reason).toBe("wrong_audience");
    const issuer = await refusal(verifyUserToken(value, { ...settings(), OIDC_ISSUER: "https://login.example.com" }));
    expect(issuer.reason).toBe("wrong_issuer");
    for (const err of [audience, issuer]) expect(err.message).not.toContain(value);
  });

  it("refuses an expired token that is otherwise valid", async () => {
    const key = signingKey();
    const now = Math.floor(Date.now() / 1000);
    // The same crafting with a live `exp` verifies, so the refusal below is the expiry alone.
    await expect(verifyUserToken(await craft(key, key.kid!), settings())).resolves.toMatchObject({ subject: "mallory" });
    const expired = await craft(key, key.kid!, { iat: now - 7200, exp: now - 3600 });
    expect((await refusal(verifyUserToken(expired, settings()))).reason).toBe("expired");
  });

  it("refuses tokens not signed by a published key, HMAC and unsigned tokens, and junk", async () => {
    const { privateKey } = await generateKeyPair("ES256", { extractable: true });
    const stranger = await exportJWK(privateKey);
    const unknownKid = await craft(stranger, "not-published");
    expect((await refusal(verifyUserToken(unknownKid, settings()))).reason).toBe("unknown_key");
    const borrowedKid = await craft(stranger, signingKey().kid!);
    expect((await refusal(verifyUserToken(borrowedKid, settings()))).reason).toBe("bad_signature");

    const hmac = await new SignJWT({ sub: "mallory", aud: SVC_API_AUDIENCE, iss: idp.issuer })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("a-secret-of-at-least-thirty-two-bytes"));
    expect((await refusal(verifyUserToken(hmac, settings()))).reason).toBe("algorithm_not_allowed");
    const [, body] = (await token("alice")).split(".");
    const unsigned = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${body}.`;
    expect((await refusal(verifyUserToken(unsigned, settings()))).reason).toMatch(/algorithm_not_allowed|malformed/);
    expect((await refusal(verifyUserToken("not-a-jwt", settings()))).reason).toBe("malformed");
    expect((await refusal(verifyUserToken("x".repeat(10_000), settings()))).reason).toBe("malformed");
  });

  it("refuses a remote plaintext JWKS URL and missing settings", async () => {
    const value = await token("alice");
    const remote = await refusal(verifyUserToken(value, { ...settings(), OIDC_JWKS_URL: "http://login.example.com/jwks" }));
    expect(remote.reason).toBe("not_configured");
    const missing = await refusal(verifyUserToken(value, { ...settings(), OIDC_AUDIENCE: "" }));
    expect(missing.reason).toBe("not_configured");
  });

  it("reports a provider whose keys cannot be fetched as unavailable, not as a bad token", async () => {
    const value = await token("alice");
    const down = await refusal(verifyUserToken(value, { ...settings(), OIDC_JWKS_URL: "http://127.0.0.1:9/jwks" }));
    expect(down.reason).toBe("unavailable");
  });

  it("gives no code without a PKCE challenge, and no token for a missing or wrong verifier", async () => {
    const noChallenge = await signInRefusal(authorize({ issuer: idp.issuer, login: "alice", codeChallenge: null }));
    expect(noChallenge.code).toBe("invalid_request");
    expect(noChallenge.message).toMatch(/PKCE/);

    const verifier = newCodeVerifier();
    for (const codeVerifier of [undefined, newCodeVerifier()]) {
      const { code, redirectUri } = await authorize({ issuer: idp.issuer, login: "alice", codeChallenge: codeChallengeOf(verifier) });
      const refused = await signInRefusal(redeemCode({ issuer: idp.issuer, code, redirectUri, codeVerifier }));
      expect(refused.code).toBe("invalid_grant");
    }
  });

  it("redeems a code once only", async () => {
    const verifier = newCodeVerifier();
    const { code, redirectUri } = await authorize({ issuer: idp.issuer, login: "alice", codeChallenge: codeChallengeOf(verifier) });
    const first = await redeemCode({ issuer: idp.issuer, code, redirectUri, codeVerifier: verifier });
    issued.push(first.access_token);
    const again = await signInRefusal(redeemCode({ issuer: idp.issuer, code, redirectUri, codeVerifier: verifier }));
    expect(again.code).toBe("invalid_grant");
  });

  it("gives the CLI a refresh token that yields a new access token for the same user", async () => {
    const verifier = newCodeVerifier();
    const { code, redirectUri } = await authorize({ issuer: idp.issuer, login: "dave", codeChallenge: codeChallengeOf(verifier) });
    const { refresh_token } = await redeemCode({ issuer: idp.issuer, code, redirectUri, codeVerifier: verifier });
    expect(refresh_token).toBeTruthy();
    const res = await fetch(`${idp.issuer}/token`, {
      method: "POST",
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: refresh_token!, client_id: CLI_CLIENT_ID }),
    });
    expect(res.status).toBe(200);
    const { access_token } = (await res.json()) as { access_token: string };
    issued.push(access_token);
    await expect(verifyUserToken(access_token, settings())).resolves.toEqual({ subject: "dave", issuer: idp.issuer });
  });

  it("accepts any loopback port for the redirect but refuses other redirect URIs", async () => {
    const challenge = codeChallengeOf(newCodeVerifier());
    for (const port of [1234, 65000]) {
      const redirectUri = `http://127.0.0.1:${port}/callback`;
      await expect(authorize({ issuer: idp.issuer, codeChallenge: challenge, redirectUri })).resolves.toMatchObject({ redirectUri });
    }
    for (const redirectUri of ["http://example.com/callback", "https://example.com/callback", "http://127.0.0.1:1234/elsewhere"]) {
      const refused = await signInRefusal(authorize({ issuer: idp.issuer, codeChallenge: challenge, redirectUri }));
      expect(refused.code).toBe("invalid_redirect_uri");
    }
  });

  it("after key rotation and a restart, signs with the new key; the same verifier takes both", async () => {
    const old = await token("alice");
    const oldKid = decodeProtectedHeader(old).kid;
    await verifyUserToken(old, settings());
    const lastFetchBefore = Date.now();

    const newKid = await rotateIdpKeys(dataDir);
    expect(newKid).not.toBe(oldKid);
    const issuerBefore = idp.issuer;
    await idp.stop();
    idp = await startIdp({ dataDir });
    // Same port, so the same issuer: tokens from before the restart stay valid.
    expect(idp.issuer).toBe(issuerBefore);

    const jwks = (await (await fetch(idp.jwksUrl)).json()) as { keys: JWK[] };
    expect(jwks.keys.map((k) => k.kid)).toEqual([newKid, oldKid]);
    const fresh = await token("bob");
    expect(decodeProtectedHeader(fresh).kid).toBe(newKid);

    // The module's cached key set holds only the old key; once its refetch cooldown has passed,
    // the unknown `kid` makes it refetch the JWKS instead of refusing.
    await new Promise((r) => setTimeout(r, Math.max(0, lastFetchBefore + JWKS_COOLDOWN_MS + 100 - Date.now())));
    await expect(verifyUserToken(fresh, settings())).resolves.toEqual({ subject: "bob", issuer: idp.issuer });
    await expect(verifyUserToken(old, settings())).resolves.toEqual({ subject: "alice", issuer: idp.issuer });
    expect(statSync(idpKeysPath(dataDir)).mode & 0o777).toBe(0o600);
  });

  it("keeps only the current and the previous key on a further rotation", async () => {
    const before = (JSON.parse(readFileSync(idpKeysPath(dataDir), "utf8")) as { keys: JWK[] }).keys;
    const newest = await rotateIdpKeys(dataDir);
    const after = (JSON.parse(readFileSync(idpKeysPath(dataDir), "utf8")) as { keys: JWK[] }).keys;
    expect(after.map((k) => k.kid)).toEqual([newest, before[0]!.kid]);
    expect(statSync(idpKeysPath(dataDir)).mode & 0o777).toBe(0o600);
  });

  it("never writes tokens to its log", () => {
    const log = readFileSync(join(dataDir, "idp.log"), "utf8");
    expect(issued.length).toBeGreaterThan(5);
    for (const value of issued) expect(log).not.toContain(value.split(".")[2]);
    expect(log).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
  });
});

describe("print-user-token", () => {
  const run = promisify(execFile);
  const printToken = (dir: string, ...args: string[]) =>
    run(BUN, [join(ROOT, "local/print-user-token.ts"), ...args], { env: { ...process.env, SVC_STACK_DIR: dir } }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
    );

  it("prints only a token of the running provider, for the given login", async () => {
    const { code, stdout } = await printToken(stackDir, "carol");
    expect(code).toBe(0);
    expect(stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    await expect(verifyUserToken(stdout.trim(), settings())).resolves.toEqual({ subject: "carol", issuer: idp.issuer });
  });

  it("says in one line that no stack is running, and exits 1", async () => {
    const empty = mkdtempSync(join(tmpdir(), "svc-nostack-"));
    const stale = mkdtempSync(join(tmpdir(), "svc-stale-"));
    try {
      mkdirSync(join(stale, "idp"));
      // An idp.json left by a killed stack: its provider no longer answers.
      writeFileSync(idpInfoPath(join(stale, "idp")), JSON.stringify({ issuer: "http://127.0.0.1:9", clientId: CLI_CLIENT_ID }));
      for (const dir of [empty, stale]) {
        const { code, stdout, stderr } = await printToken(dir);
        expect(code).toBe(1);
        expect(stdout).toBe("");
        expect(stderr).toMatch(/^No local stack is running[^\n]*\n$/);
      }
    } finally {
      rmSync(empty, { recursive: true, force: true });
      rmSync(stale, { recursive: true, force: true });
    }
  });
});
