/**
 * Conformance of key management to ../shared/spec/decision-service.md, as a client that sends only
 * `{name}` and `{}`: the secret is returned once and never listed, a revoked key gets 401, key
 * management takes the user's access token, and every request checks the key's revocation and its
 * account's status.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { remember, signIn } from "../support/api.ts";
import { expectOk, expectStatus, get, obj, post, type Json, type JsonObject } from "./client.ts";
import { account, setAccountStatus } from "./operator.ts";

let user: { token: string };
beforeAll(async () => {
  user = await signIn();
});

/** The listed metadata of the user's keys. */
async function listed(token: string): Promise<{ text: string; keys: JsonObject[] }> {
  const reply = await get("/v1/keys", token);
  expectStatus(reply, 200);
  const arrays = Object.values(obj(reply.body)).filter((v): v is Json[] => Array.isArray(v));
  expect(arrays, reply.text).toHaveLength(1);
  return { text: reply.text, keys: arrays[0]!.map(obj) };
}

/**
 * Creates a key named `name`; its metadata and its secret. The secret's field name is not shown: it
 * is the one value of the creation that the listing of the same key does not hold, and it works as
 * an API key.
 */
async function created(name: string): Promise<{ metadata: JsonObject; secret: string }> {
  const reply = await post("/v1/keys", user.token, { name });
  expectOk(reply);
  const metadata = obj(reply.body);
  expect(metadata).toMatchObject({ id: expect.any(String), name });
  const item = (await listed(user.token)).keys.find((k) => k.id === metadata.id);
  expect(item, "the new key is listed").toBeDefined();
  const unlisted = Object.values(metadata).filter((v): v is string => typeof v === "string" && !Object.values(item!).includes(v));
  expect(unlisted, "exactly one value of the creation is not in the listing").toHaveLength(1);
  const secret = remember(unlisted[0]!);
  return { metadata, secret };
}

describe("Key management", () => {
  it("Key management: POST /v1/keys {name} with a user access token returns the key's metadata and its secret, which works as an API key", async () => {
    const { secret } = await created("conformance first");
    expectStatus(await get("/v1/models", secret), 200);
  });

  it("API key: the secret is returned once, never in GET /v1/keys, and each key's is distinct with room for 256 random bits", async () => {
    const first = await created("conformance a");
    const second = await created("conformance b");
    expect(second.secret).not.toBe(first.secret);
    // A Bearer token's characters (RFC 6750 b64token) carry at most 6.05 bits each: 256 bits take 43, and the key's identifier more.
    for (const { secret } of [first, second]) {
      expect(secret).toMatch(/^[A-Za-z0-9\-._~+/]+=*$/);
      expect(secret.length).toBeGreaterThan(43);
    }
    const { text, keys } = await listed(user.token);
    expect(keys.map((k) => k.id)).toEqual(expect.arrayContaining([first.metadata.id, second.metadata.id]));
    expect(keys.find((k) => k.id === first.metadata.id)?.name).toBe("conformance a");
    for (const { secret } of [first, second]) expect(text).not.toContain(secret);
  });

  it("API key cardinality: many keys per account, each authenticating", async () => {
    const keys = await Promise.all([1, 2, 3].map((n) => created(`conformance many ${n}`)));
    for (const { secret } of keys) expectStatus(await get("/v1/models", secret), 200);
  });

  it("Key management: revoke returns the revoked key's metadata; the key then gets 401 on models, decisions and bulk, while the account's other keys work", async () => {
    const doomed = await created("conformance doomed");
    const kept = await created("conformance kept");
    const revoked = await post(`/v1/keys/${doomed.metadata.id}/revoke`, user.token, {});
    expectOk(revoked);
    expect(obj(revoked.body)).toMatchObject({ id: doomed.metadata.id, name: "conformance doomed" });
    expect(revoked.text).not.toContain(doomed.secret);
    expectStatus(await get("/v1/models", doomed.secret), 401);
    expectStatus(await post("/v1/systemone", doomed.secret, { model: "svc-shared", state: "s", questions: { q: { type: "noul" } } }), 401);
    expectStatus(await post("/v1/batches", doomed.secret, { idempotency_key: "after-revoke" }), 401);
    expectStatus(await get("/v1/models", kept.secret), 200);
  });
});

describe("Authentication", () => {
  it("Authentication rule 2: key management takes the user's access token; an API key, a missing or an invalid token gets 401", async () => {
    const { secret } = await created("conformance not for keys");
    expectStatus(await post("/v1/keys", secret, { name: "from a key" }), 401);
    expectStatus(await get("/v1/keys", secret), 401);
    expectStatus(await post("/v1/keys", undefined, { name: "nobody" }), 401);
    expectStatus(await get("/v1/keys"), 401);
    expectStatus(await get("/v1/keys", "not-a-token"), 401);
  });

  it("API key checks: the account's status is checked on every request", async () => {
    const owner = await account();
    expectStatus(await get("/v1/models", owner.key.secret), 200);
    await setAccountStatus(owner, "disabled");
    const refused = await get("/v1/models", owner.key.secret);
    expect(refused.status >= 400 && refused.status < 500, `${refused.status}: ${refused.text}`).toBe(true);
    await setAccountStatus(owner, "active");
    expectStatus(await get("/v1/models", owner.key.secret), 200);
  });
});
