/**
 * The shared security tests (support/security.ts) over the routes their own test files do not run
 * them on: trainings (a signed-in user's token), image assets and credit (the owner's API key or a
 * signed-in user's token), image models and image decisions (a signed-in session only). The global
 * stack has both image flags on. Each route's `ok` is what a fresh account's good credential gets:
 * an unknown id is a 404, a model the account cannot use a 404, as the spec makes them. And signed
 * URLs, which come from the edge's configured base URL whatever Host a request names.
 */
import { describe, expect, it } from "vitest";
import { setStatus } from "../ops/accounts.ts";
import { call, newAccount, stack, withDb } from "./support/api.ts";
import { jsonOf, rawHttp, statusOf } from "./support/raw-http.ts";
import { expectError, keyOrUserRouteSecurity, userRouteSecurity } from "./support/security.ts";

const unknownTraining = `trn_${"a".repeat(26)}`;
const unknownAsset = "00000000-0000-4000-8000-000000000000";

describe("trainings", () => {
  userRouteSecurity({ method: "POST", path: "/v1/trainings", body: { idempotency_key: "security", input_bytes: 100 }, ok: [200, 201] });
  userRouteSecurity({ method: "GET", path: "/v1/trainings" });
  userRouteSecurity({ method: "GET", path: `/v1/trainings/${unknownTraining}`, ok: 404 });
  userRouteSecurity({ method: "POST", path: `/v1/trainings/${unknownTraining}/submit`, body: {}, ok: 404 });
  userRouteSecurity({ method: "POST", path: `/v1/trainings/${unknownTraining}/cancel`, body: {}, ok: 404 });
  userRouteSecurity({ method: "GET", path: `/v1/trainings/${unknownTraining}/report`, ok: 404 });
  userRouteSecurity({ method: "GET", path: `/v1/trainings/${unknownTraining}/report.svg`, ok: 404 });
  userRouteSecurity({ method: "POST", path: "/v1/models/ft:no-such-model/retire", body: {}, ok: 404 });

  it("refuses a disabled account's user as its keys are refused (401 account_disabled, once 403 forbidden here)", async () => {
    const account = await newAccount();
    await withDb((db) => setStatus(db, account.accountId, "disabled"));
    expectError(await call("/v1/trainings", { token: account.userToken, body: { idempotency_key: "disabled", input_bytes: 100 } }), 401, "account_disabled");
    expectError(await call("/v1/trainings", { method: "GET", token: account.userToken }), 401, "account_disabled");
    expectError(await call("/v1/keys", { token: account.userToken, body: { name: "more" } }), 401, "account_disabled");
  });

  it("tells an API key what this route takes, not that it cannot manage keys", async () => {
    const account = await newAccount();
    const reply = await call("/v1/trainings", { method: "GET", token: account.key.secret });
    expectError(reply, 401, "wrong_credential_kind");
    expect(JSON.stringify(reply.body)).toContain("an API key cannot be used on this route: it takes a signed-in user's access token");
  });
});

describe("image assets and credit", () => {
  keyOrUserRouteSecurity({ method: "POST", path: "/v1/image-assets", body: { purpose: "prediction", filename: "cat.png", source_bytes: 1000, sha256: "ab".repeat(32) }, ok: [200, 201] });
  keyOrUserRouteSecurity({ method: "GET", path: `/v1/image-assets/${unknownAsset}`, ok: 404 });
  keyOrUserRouteSecurity({ method: "POST", path: `/v1/image-assets/${unknownAsset}/complete`, body: {}, ok: 404 });
  keyOrUserRouteSecurity({ method: "GET", path: "/v1/image-credit" });
});

describe("image models and image decisions (a signed-in session)", () => {
  userRouteSecurity({ method: "GET", path: "/v1/image-models" });
  userRouteSecurity({
    method: "POST",
    path: "/v1/image-decisions",
    body: { model: "no-such-model", state: "s", questions: { q: { type: "choice", criteria: { a: null, b: null } } }, images: [{ asset_id: unknownAsset }] },
    ok: 404,
  });
});

/** A POST to the edge naming `host` in its Host header (fetch cannot send one of its own choosing). */
async function withHost(path: string, host: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const text = JSON.stringify(body);
  const headers: [string, string][] = [["Host", host], ["authorization", `Bearer ${token}`], ["content-type", "application/json"], ["content-length", String(Buffer.byteLength(text))]];
  const answer = await rawHttp(new URL(path, stack().baseUrl), "POST", headers, text);
  return { status: statusOf(answer), body: jsonOf(answer) };
}

describe("signed URLs", () => {
  it("point at the configured base URL, never at the Host a request names (a batch's, a training's and an image's upload)", async () => {
    const account = await newAccount();
    const edge = new URL(stack().baseUrl);
    const uploads = [
      await withHost("/v1/batches", "attacker.example", account.key.secret, { idempotency_key: "foreign-host", input_bytes: 100 }),
      await withHost("/v1/trainings", "attacker.example:8443", account.userToken, { idempotency_key: "foreign-host", input_bytes: 100 }),
      await withHost("/v1/image-assets", "attacker.example", account.key.secret, { purpose: "prediction", filename: "cat.png", source_bytes: 1000, sha256: "ab".repeat(32) }),
    ];
    for (const reply of uploads) {
      expect(reply.status, JSON.stringify(reply.body)).toBe(201);
      const url = new URL((reply.body.upload as { url: string }).url);
      expect(url.origin).toBe(edge.origin);
      expect(url.pathname).toMatch(/^\/storage\//);
    }
  });
});
