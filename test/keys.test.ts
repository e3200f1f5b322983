/**
 * Key management through the real Worker: POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}/revoke,
 * with user access tokens from the real local identity provider.
 */
import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { CreatedKey, KEY_NAME_MAX, KeyList, KeyMetadata } from "../contract/keys.ts";
import type { ResultRecord } from "../contract/batches.ts";
import { call, createKey, query, remember, signIn } from "./support/api.ts";
import { lines, poll, results, type Account } from "./support/bulk.ts";
import { expectError, userRouteSecurity } from "./support/security.ts";

let user: { login: string; token: string };

beforeAll(async () => {
  user = await signIn();
});

describe("POST /v1/keys", () => {
  it("creates the account with its first key and shows the secret once", async () => {
    const reply = await call("/v1/keys", { token: user.token, body: { name: "ci" } });
    expect(reply.status).toBe(201);
    const key = CreatedKey.parse(reply.body);
    remember(key.secret);
    expect(Object.keys(reply.body).sort()).toEqual(["created_at", "expires_at", "id", "models", "name", "revoked_at", "scope", "secret", "status"]);
    // Created with none of the limits: it can do what its account can, for ever (as every older key).
    expect(key).toMatchObject({ name: "ci", status: "active", revoked_at: null, expires_at: null, scope: null, models: null });
    expect(key.secret).toMatch(new RegExp(`^svc_${key.id}_[A-Za-z0-9_-]{43}$`));
    // 256 bits of secret material: 43 base64url characters carry 258 bits, the last 2 of them padding.
    expect(Buffer.from(key.secret.slice(-43), "base64url")).toHaveLength(32);

    const accounts = await query("SELECT a.* FROM accounts a JOIN api_keys k ON k.account_id = a.id WHERE k.id = $1", [key.id]);
    expect(accounts).toHaveLength(1);
    expect(accounts[0]).toMatchObject({ idp_subject: user.login, status: "active", requests_per_second: null, tokens_per_second: null });
  });

  it("stores only the SHA-256 digest of the secret", async () => {
    const key = await createKey(user.token, "digest check");
    const rows = await query("SELECT * FROM api_keys WHERE id = $1", [key.id]);
    expect(rows[0]?.digest).toBe(createHash("sha256").update(key.secret).digest("hex"));
    expect(JSON.stringify(rows[0])).not.toContain(key.secret.slice(-43));
  });

  it("gives every key a distinct identifier and secret, many per account", async () => {
    const made = await Promise.all([1, 2, 3, 4, 5].map((n) => createKey(user.token, `many ${n}`)));
    expect(new Set(made.map((k) => k.id)).size).toBe(5);
    expect(new Set(made.map((k) => k.secret)).size).toBe(5);
    const accounts = await query("SELECT DISTINCT account_id FROM api_keys WHERE id = ANY($1)", [made.map((k) => k.id)]);
    expect(accounts).toHaveLength(1);
  });

  it("trims the name and accepts names up to the limit", async () => {
    expect((await createKey(user.token, "  spaced  ")).name).toBe("spaced");
    expect((await createKey(user.token, "x".repeat(KEY_NAME_MAX))).name).toHaveLength(KEY_NAME_MAX);
  });

  it.each([
    ["a missing name", {}, /name is required/],
    ["a name of the wrong type", { name: 42 }, /name must be a string/],
    ["an empty name", { name: "" }, /name must not be empty$/],
    // Blank by JavaScript's trim, and by the document's pattern for the same characters.
    ["a blank name", { name: " \t\u3000\ufeff " }, /name must not be blank/],
    ["a name that is too long", { name: "x".repeat(KEY_NAME_MAX + 1) }, new RegExp(`at most ${KEY_NAME_MAX}`)],
    ["a body that is not an object", ["ci"], /expected object/i],
  ])("refuses %s with 422 and a clear message", async (_, body, message) => {
    const reply = await call<{ error: { message: string } }>("/v1/keys", { token: user.token, body });
    expectError(reply, 422, "invalid_request");
    expect(reply.body.error.message).toMatch(message);
  });

  it("refuses a body that is not JSON", async () => {
    expectError(await call("/v1/keys", { token: user.token, rawBody: "{name: ci" }), 422, "invalid_request");
  });

  it("issues no key to a disabled account", async () => {
    const other = await signIn();
    const first = await createKey(other.token);
    await query("UPDATE accounts SET status = 'disabled' WHERE id = (SELECT account_id FROM api_keys WHERE id = $1)", [first.id]);
    expectError(await call("/v1/keys", { token: other.token, body: { name: "more" } }), 401, "account_disabled");
  });

  userRouteSecurity({ method: "POST", path: "/v1/keys", body: { name: "x" }, ok: 201 });
});

describe("GET /v1/keys", () => {
  it("lists the account's keys newest first, without secrets or digests", async () => {
    const lister = await signIn();
    const first = await createKey(lister.token, "first");
    const second = await createKey(lister.token, "second");
    const reply = await call("/v1/keys", { token: lister.token });
    expect(reply.status).toBe(200);
    const list = KeyList.parse(reply.body);
    expect(list.keys.map((k) => k.id)).toEqual([second.id, first.id]);
    for (const key of list.keys) expect(Object.keys(key).sort()).toEqual(["created_at", "expires_at", "id", "models", "name", "revoked_at", "scope", "status"]);
    const text = JSON.stringify(reply.body);
    for (const key of [first, second]) {
      expect(text).not.toContain(key.secret);
      expect(text).not.toContain(createHash("sha256").update(key.secret).digest("hex"));
    }
  });

  it("is empty for a user who has no account yet", async () => {
    const fresh = await signIn();
    const reply = await call("/v1/keys", { token: fresh.token });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ keys: [] });
  });

  it("never shows another account's keys", async () => {
    const a = await signIn();
    const b = await signIn();
    const keyOfA = await createKey(a.token, "a's");
    await createKey(b.token, "b's");
    const list = KeyList.parse((await call("/v1/keys", { token: b.token })).body);
    expect(list.keys.map((k) => k.id)).not.toContain(keyOfA.id);
    expect(list.keys).toHaveLength(1);
  });

  userRouteSecurity({ method: "GET", path: "/v1/keys" });
});

describe("POST /v1/keys/{id}/revoke", () => {
  it("revokes a key, shows it as revoked, and is repeatable", async () => {
    const key = await createKey(user.token, "revoke me");
    const reply = await call(`/v1/keys/${key.id}/revoke`, { token: user.token, body: {} });
    expect(reply.status).toBe(200);
    const revoked = KeyMetadata.parse(reply.body);
    expect(revoked).toMatchObject({ id: key.id, status: "revoked" });
    expect(revoked.revoked_at).not.toBeNull();
    expect(JSON.stringify(reply.body)).not.toContain(key.secret);

    const again = await call(`/v1/keys/${key.id}/revoke`, { token: user.token, method: "POST" });
    expect(again.status).toBe(200);
    expect(KeyMetadata.parse(again.body).revoked_at).toBe(revoked.revoked_at);

    const listed = KeyList.parse((await call("/v1/keys", { token: user.token })).body).keys.find((k) => k.id === key.id);
    expect(listed?.status).toBe("revoked");
  });

  it("answers 404 for another account's key, and leaves it active", async () => {
    const owner = await signIn();
    const key = await createKey(owner.token, "not yours");
    const intruder = await signIn();
    await createKey(intruder.token);
    const reply = await call<{ error: { message: string } }>(`/v1/keys/${key.id}/revoke`, { token: intruder.token, body: {} });
    expectError(reply, 404, "not_found");
    const unknown = await call<{ error: { message: string } }>(`/v1/keys/${"b".repeat(26)}/revoke`, { token: intruder.token, body: {} });
    expectError(unknown, 404, "not_found");
    expect(reply.body.error.message.replace(key.id, "ID")).toBe(unknown.body.error.message.replace("b".repeat(26), "ID"));
    const rows = await query("SELECT revoked_at FROM api_keys WHERE id = $1", [key.id]);
    expect(rows[0]?.revoked_at).toBeNull();
  });

  it("answers 404 for an id that is not a key id", async () => {
    expectError(await call("/v1/keys/../../etc/revoke", { token: user.token, body: {} }), 404, "not_found");
    expectError(await call("/v1/keys/NOT-AN-ID/revoke", { token: user.token, body: {} }), 404, "not_found");
  });

  it("refuses a body other than {}", async () => {
    const key = await createKey(user.token);
    expectError(await call(`/v1/keys/${key.id}/revoke`, { token: user.token, rawBody: "[" }), 422, "invalid_request");
    // A field is refused too: the body carries nothing, so the document allows exactly `{}`.
    expectError(await call(`/v1/keys/${key.id}/revoke`, { token: user.token, body: { reason: "x" } }), 422, "invalid_request");
    expect((await call(`/v1/keys/${key.id}/revoke`, { token: user.token, rawBody: "" })).status).toBe(200);
  });

  userRouteSecurity({ method: "POST", path: `/v1/keys/${"c".repeat(26)}/revoke`, body: {}, ok: 404 });
});

describe("keys created for less", () => {
  const decide = (secret: string, model?: string) =>
    call("/v1/systemone", { token: secret, body: { ...(model ? { model } : {}), state: "charged twice", questions: { q: { type: "noul", instructions: "Is it about money?" } } } });
  const newKey = async (body: Record<string, unknown>) => {
    const reply = await call("/v1/keys", { token: user.token, body: { name: "limited", ...body } });
    expect(reply.status, JSON.stringify(reply.body)).toBe(201);
    const key = CreatedKey.parse(reply.body);
    remember(key.secret);
    return key;
  };

  it("refuses an unknown field on the management routes (422 naming it) where it was once dropped, and an expiry in the past", async () => {
    const typo = await call("/v1/keys", { token: user.token, body: { name: "short", expire_at: "2030-01-01T00:00:00Z" } });
    expectError(typo, 422, "invalid_request");
    expect(JSON.stringify(typo.body)).toContain("unknown field expire_at");
    const past = await call("/v1/keys", { token: user.token, body: { name: "short", expires_at: "2000-01-01T00:00:00Z" } });
    expectError(past, 422, "invalid_request");
    expect(JSON.stringify(past.body)).toContain("expires_at must be in the future");
    for (const bad of [{ expires_at: "tomorrow" }, { scope: "everything" }, { models: [] }, { models: Array.from({ length: 17 }, (_, i) => `m${i}`) }]) {
      expectError(await call("/v1/keys", { token: user.token, body: { name: "bad", ...bad } }), 422, "invalid_request");
    }
    const key = await createKey(user.token);
    const batch = await call("/v1/batches", { token: key.secret, body: { idempotency_key: "strict", input_bytes: 10, metadata_typo: {} } });
    expectError(batch, 422, "invalid_request");
    expect(JSON.stringify(batch.body)).toContain("unknown field metadata_typo");
    const training = await call("/v1/trainings", { token: user.token, body: { idempotency_key: "strict", input_bytes: 10, modle: "svc-shared" } });
    expectError(training, 422, "invalid_request");
    expect(JSON.stringify(training.body)).toContain("unknown field modle");
  });

  it("refuses a key past its expiry on its very next request (401 expired_key), and lists it as expired", async () => {
    const key = await newKey({ expires_at: new Date(Date.now() + 3_600_000).toISOString() });
    expect(key.expires_at).not.toBeNull();
    expect((await decide(key.secret)).status).toBe(200);
    // The hour passes (a kept key is confirmed by the sidecar against its row: the next request fails).
    await query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [key.id]);
    for (const path of ["/v1/models", "/v1/batches"]) expectError(await call(path, { token: key.secret }), 401, "expired_key");
    expectError(await decide(key.secret), 401, "expired_key");
    const listed = KeyList.parse((await call("/v1/keys", { token: user.token })).body).keys.find((k) => k.id === key.id);
    expect(listed).toMatchObject({ status: "expired" });
  });

  it("holds a decisions-only key to decisions and models (403 insufficient_scope on batches); decisions_and_batches takes batches too", async () => {
    const decisionsOnly = await newKey({ scope: "decisions" });
    expect(decisionsOnly.scope).toBe("decisions");
    expect((await decide(decisionsOnly.secret)).status).toBe(200);
    expect((await call("/v1/models", { token: decisionsOnly.secret })).status).toBe(200);
    for (const [path, body] of [["/v1/batches", { idempotency_key: "scoped", input_bytes: 10 }], ["/v1/batches", undefined], [`/v1/batches/${crypto.randomUUID()}`, undefined]] as const) {
      const reply = await call(path, { token: decisionsOnly.secret, body });
      expectError(reply, 403, "insufficient_scope");
      expect(JSON.stringify(reply.body)).toContain("created for decisions only");
    }
    const both = await newKey({ scope: "decisions_and_batches" });
    expect((await call("/v1/batches", { token: both.secret, body: { idempotency_key: "scoped", input_bytes: 10 } })).status).toBe(201);
    expect((await decide(both.secret)).status).toBe(200);
  });

  it("holds a key to the model names it was created for, in real-time decisions and in its batches' records", async () => {
    const key = await newKey({ scope: "decisions_and_batches", models: ["svc-shared"] });
    expect(key.models).toEqual(["svc-shared"]);
    expect((await decide(key.secret)).status).toBe(200); // no model: the shared alias, which it names
    expect((await decide(key.secret, "svc-shared")).status).toBe(200);
    const release = (await query<{ release_id: string }>("SELECT release_id FROM model_aliases WHERE alias = 'svc-shared'"))[0]!.release_id;
    const refused = await decide(key.secret, release);
    expectError(refused, 403, "insufficient_scope");
    expect(JSON.stringify(refused.body)).toContain('may name only these models: \\"svc-shared\\"');
    // Its batch runs only on what it names: a record naming another model, or the alias's release by
    // its id (refused in real time just above), is answered model_not_found.
    const input = lines([
      { custom_id: "named", body: { model: "svc-shared", state: "refund", questions: { q: { type: "noul" } } } },
      { custom_id: "other", body: { model: "some-other-model", state: "refund", questions: { q: { type: "noul" } } } },
      { custom_id: "release", body: { model: release, state: "refund", questions: { q: { type: "noul" } } } },
    ]);
    const id = await uploaded(key.secret, "models", input);
    expect((await call(`/v1/batches/${id}/submit`, { token: key.secret, body: {} })).status).toBe(200);
    const [frozen] = await query<{ models: { releases: Record<string, string>; aliases: Record<string, string>; direct: string[] } }>("SELECT models FROM batches WHERE id = $1", [id]);
    expect(Object.keys(frozen!.models.aliases)).toEqual(["svc-shared"]);
    expect(Object.keys(frozen!.models.releases)).toEqual([release]);
    expect(frozen!.models.direct).toEqual([]);
    expect(outcomes(await finished(key.secret, id))).toEqual({ named: "answered", other: "model_not_found", release: "model_not_found" });
  });

  it("never lets a key do through another key's batch what it could not do itself: a submit freezes what both keys may use, and the usage is the submitter's", async () => {
    const open = await newKey({});
    const imageOnly = await newKey({ models: ["svc-image"] });
    const input = lines([{ custom_id: "text", body: { model: "svc-shared", state: "refund", questions: { q: { type: "noul" } } } }]);
    // The unrestricted key creates; the restricted one repeats the create, takes the grant, uploads and submits.
    const key = `takeover-${crypto.randomUUID()}`;
    const created = await call<{ id: string }>("/v1/batches", { token: open.secret, body: { idempotency_key: key } });
    expect(created.status).toBe(201);
    const id = await uploaded(imageOnly.secret, key, input);
    expect(id).toBe(created.body.id);
    expect((await call(`/v1/batches/${id}/submit`, { token: imageOnly.secret, body: {} })).status).toBe(200);
    expect(outcomes(await finished(open.secret, id))).toEqual({ text: "model_not_found" });
    expect(await query("SELECT submitted_by_key FROM batches WHERE id = $1", [id])).toEqual([{ submitted_by_key: imageOnly.id }]);

    // The other way round: a key of the text model submits the open key's batch; it runs, and its usage is the submitter's.
    const textOnly = await newKey({ models: ["svc-shared"] });
    const second = `submitter-${crypto.randomUUID()}`;
    const made = await call<{ id: string }>("/v1/batches", { token: open.secret, body: { idempotency_key: second } });
    await uploaded(open.secret, second, input);
    expect((await call(`/v1/batches/${made.body.id}/submit`, { token: textOnly.secret, body: {} })).status).toBe(200);
    expect(outcomes(await finished(open.secret, made.body.id))).toEqual({ text: "answered" });
    expect(await query("SELECT key_id FROM usage_records WHERE request_id = $1", [`batch_${made.body.id}_1`])).toEqual([{ key_id: textOnly.id }]);
    const usage = await call<{ data: { key_id: string | null; batch_records: number }[] }>("/v1/usage?group_by=key", { token: user.token });
    expect(usage.body.data.find((b) => b.key_id === textOnly.id)).toMatchObject({ batch_records: 1 });
    expect(usage.body.data.find((b) => b.key_id === open.id)).toBeUndefined();
  });
});

/** The batch of `idempotencyKey` (made by `secret` when new), its upload taken and used by `secret`; its id. */
async function uploaded(secret: string, idempotencyKey: string, input: string): Promise<string> {
  const created = await call<{ id: string; upload: { url: string; headers: Record<string, string> } }>("/v1/batches", { token: secret, body: { idempotency_key: idempotencyKey } });
  remember(new URL(created.body.upload.url).searchParams.get("X-Amz-Signature")!);
  expect((await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: input })).status).toBe(200);
  return created.body.id;
}

/** The batch's results once it has finished. */
async function finished(secret: string, id: string): Promise<ResultRecord[]> {
  const account = { key: { secret } } as Account;
  expect((await poll(account, id)).status).toBe("completed");
  return results(account, id);
}

/** Each record's outcome: "answered", or its error's code. */
const outcomes = (records: ResultRecord[]) => Object.fromEntries(records.map((r) => [r.custom_id, "response" in r ? "answered" : r.error.code]));
