/**
 * Bulk batches at the edge, through the real Worker with its real local R2 and Postgres: create
 * (idempotent, quota-admitted), the signed upload (curl-like PUTs), submit, status, cancel, list,
 * results (records written directly until the bulk worker exists), and who may see what.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Batch, BatchList, ResultsPage } from "../contract/batches.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { LIMITS, SHARED_ALIAS } from "../contract/limits.ts";
import { METADATA_LIMITS } from "../contract/jobs.ts";
import { signUpload } from "../server-shared/grants.ts";
import { setSettings } from "../ops/accounts.ts";
import { call, createKey, newAccount, query, remember, stack, withDb, type Reply } from "./support/api.ts";
import { jsonOf, rawHttp, statusOf } from "./support/raw-http.ts";
import { apiKeyRouteSecurity, expectError } from "./support/security.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

const jsonl = (n: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `r${i}`, body: { state: `ticket ${i}`, questions: { q: { type: "noul" } } } })).join("\n") + "\n";

const create = (token: string, idempotency_key: unknown, input_bytes: unknown = jsonl(1).length) => call<Batch>("/v1/batches", { token, body: { idempotency_key, input_bytes } });

/** A new batch of `account` for `input`, with its upload. */
async function newBatch(account: Account, input = jsonl(1), key = `k-${randomBytes(6).toString("hex")}`): Promise<Batch & { upload: NonNullable<Batch["upload"]> }> {
  const reply = await create(account.key.secret, key, Buffer.byteLength(input));
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  const batch = Batch.parse(reply.body);
  expect(batch.upload).toBeDefined();
  remember(new URL(batch.upload!.url).searchParams.get("X-Amz-Signature")!);
  return batch as Batch & { upload: NonNullable<Batch["upload"]> };
}

/** `curl -T file -H <each returned header> "$url"`. */
function put(upload: { url: string; headers: Record<string, string> }, body: string | Uint8Array, headers: Record<string, string> = upload.headers): Promise<Response> {
  return fetch(upload.url, { method: "PUT", headers, body });
}

async function envelope(res: Response): Promise<{ status: number; code: string; message: string }> {
  const { error } = ErrorEnvelope.parse(await res.json());
  return { status: res.status, code: error.code, message: error.message };
}

/** Writes committed results directly and ends the batch, as the bulk worker will (part 2). */
async function finishWith(batchId: string, records: number, finishedAgoMs = 0): Promise<void> {
  await withDb(async (db) => {
    for (let line = 1; line <= records; line++) {
      // Answers keyed by names that a plain object would reorder: the text must come back verbatim.
      const result = `{"custom_id":"r${line}","response":{"model":"m","answers":{"10":{"type":"noul","noul":0.5},"2":{"type":"noul","noul":0.25}},"usage":{"input_tokens":1,"output_tokens":1}}}`;
      await db.query("INSERT INTO batch_results (batch_id, line, custom_id, result) VALUES ($1, $2, $3, $4)", [batchId, line, `r${line}`, result]);
    }
    await db.query(
      `UPDATE batches SET status = 'completed', finished_at = now() - make_interval(secs => $2::double precision / 1000),
              total_records = $3, completed_records = $3 WHERE id = $1`,
      [batchId, finishedAgoMs, records],
    );
  });
}

let account: Account;
beforeAll(async () => {
  account = await newAccount();
});

describe("POST /v1/batches", () => {
  it("creates a batch with its limits and a signed upload that carries no API key", async () => {
    const batch = await newBatch(account);
    expect(batch).toMatchObject({
      object: "batch",
      status: "uploading",
      request_counts: { total: 0, completed: 0, failed: 0 },
      submitted_at: null,
      finished_at: null,
      results_expire_at: null,
      error: null,
      limits: { file_bytes: LIMITS.bulkFileBytes, records: LIMITS.bulkFileRecords, results_page: 20, lifetime_seconds: 86_400, upload_validity_seconds: 7200 },
    });
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBe(LIMITS.batchLifetimeMs);
    // The upload is bound to the declared size: content-length is one of its signed headers.
    expect(batch).toMatchObject({ input_bytes: jsonl(1).length });
    expect(batch.upload).toMatchObject({ method: "PUT", headers: { "content-length": String(jsonl(1).length), "if-none-match": "*" } });
    expect(new URL(batch.upload.url).searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;host;if-none-match");
    expect(Date.parse(batch.upload.expires_at) - Date.now()).toBeGreaterThan(LIMITS.signedUploadValidityMs - 60_000);
    const url = new URL(batch.upload.url);
    expect(url.searchParams.get("X-Amz-Algorithm")).toBe("AWS4-HMAC-SHA256");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("7200");
    expect(url.pathname).toBe(`/storage/batches/${batch.id}/input.jsonl`);
    expect(batch.upload.url).not.toContain(account.key.secret);
    expect(batch.upload.url).not.toContain(account.key.id);
  });

  it("returns the same batch for the same key (200), with a fresh upload until the input arrives and none after", async () => {
    const batch = await newBatch(account, jsonl(2));
    const again = await create(account.key.secret, batch.idempotency_key, jsonl(2).length);
    expect(again.status).toBe(200);
    const repeated = Batch.parse(again.body);
    expect(repeated.id).toBe(batch.id);
    expect((await put(repeated.upload!, jsonl(2))).status).toBe(200);
    const after = Batch.parse((await create(account.key.secret, batch.idempotency_key, jsonl(2).length)).body);
    expect(after.id).toBe(batch.id);
    expect(after.upload).toBeUndefined();
    // Any key of the account names the same batch.
    const other = await createKey(account.userToken, "second key");
    expect(Batch.parse((await create(other.secret, batch.idempotency_key, jsonl(2).length)).body).id).toBe(batch.id);
    // The size is part of what the key names: another size is refused, before and after the upload.
    const conflict = await create(account.key.secret, batch.idempotency_key, jsonl(3).length);
    expectError(conflict, 409, "idempotency_conflict");
    expect(ErrorEnvelope.parse(conflict.body).error.message).toContain(`an input of ${jsonl(2).length} bytes, not ${jsonl(3).length}`);
    const fresh = await newBatch(account, jsonl(1));
    expectError(await create(account.key.secret, fresh.idempotency_key, jsonl(1).length + 1), 409, "idempotency_conflict");
  });

  it("makes one batch for one key under concurrent creates, and scopes keys per account", async () => {
    const key = `concurrent-${randomBytes(4).toString("hex")}`;
    const replies = await Promise.all(Array.from({ length: 8 }, () => create(account.key.secret, key)));
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(replies.map((r) => Batch.parse(r.body).id)).size).toBe(1);
    expect(await query("SELECT id FROM batches WHERE account_id = $1 AND idempotency_key = $2", [account.accountId, key])).toHaveLength(1);
    const other = await newAccount();
    const theirs = await create(other.key.secret, key);
    expect(theirs.status).toBe(201);
    expect(Batch.parse(theirs.body).id).not.toBe(Batch.parse(replies[0]!.body).id);
  });

  it("refuses a fractional, empty or oversized input_bytes with 422, creating nothing", async () => {
    for (const [bad, message] of [
      [null, /must be a number/],
      ["12", /must be a number/],
      [1.5, /must be an integer/],
      [0, /at least 1/],
      [LIMITS.bulkFileBytes + 1, new RegExp(`at most ${LIMITS.bulkFileBytes}`)],
    ] as const) {
      const key = `size-${randomBytes(4).toString("hex")}`;
      const reply = await call("/v1/batches", { token: account.key.secret, body: { idempotency_key: key, input_bytes: bad } });
      expectError(reply, 422, "invalid_request");
      expect(ErrorEnvelope.parse(reply.body).error.message).toMatch(message);
      expect(await query("SELECT id FROM batches WHERE account_id = $1 AND idempotency_key = $2", [account.accountId, key])).toHaveLength(0);
    }
    expect((await create(account.key.secret, `size-max-${randomBytes(4).toString("hex")}`, LIMITS.bulkFileBytes)).status).toBe(201);
  });

  it("refuses a bad idempotency key with 422", async () => {
    for (const [bad, message] of [
      ["", /must not be empty/],
      ["k".repeat(256), /at most 255/],
      [7, /must be a string/],
      [undefined, /is required/],
    ] as const) {
      expectError(await create(account.key.secret, bad), 422, "invalid_request");
      expect(ErrorEnvelope.parse((await create(account.key.secret, bad)).body).error.message).toMatch(message);
    }
    const nul = await call("/v1/batches", { token: account.key.secret, rawBody: '{"idempotency_key":"a\\u0000b"}' });
    expectError(nul, 422, "invalid_request");
    expect(await query("SELECT id FROM batches WHERE account_id = $1 AND idempotency_key LIKE 'a%b'", [account.accountId])).toHaveLength(0);
  });
});

describe("account batch quotas", () => {
  it("admits at most max_active_batches under concurrent creates from several keys, then 429 with Retry-After", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { max_active_batches: 2 }));
    const keys = [limited.key, await createKey(limited.userToken, "k2"), await createKey(limited.userToken, "k3")];
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => create(keys[i % 3]!.secret, `a-${i}`)));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(2);
    const refused = replies.filter((r) => r.status !== 201);
    for (const reply of refused) {
      expectError(reply, 429, "active_batch_limit");
      expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    // A finished batch frees its slot.
    const first = Batch.parse(replies.find((r) => r.status === 201)!.body);
    expect((await call(`/v1/batches/${first.id}/cancel`, { token: limited.key.secret, body: {} })).status).toBe(200);
    expect((await create(limited.key.secret, "after-cancel")).status).toBe(201);
  });

  it("reserves 25 MiB per batch until it is purged, cancelled and failed ones included", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { max_batch_storage_bytes: 2 * LIMITS.batchStorageReservationBytes }));
    const replies = await Promise.all(Array.from({ length: 5 }, (_, i) => create(limited.key.secret, `s-${i}`)));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(2);
    for (const reply of replies.filter((r) => r.status !== 201)) expectError(reply, 429, "batch_storage_limit");
    // Ending them frees nothing: what they committed is kept until cleanup purges it.
    for (const reply of replies.filter((r) => r.status === 201)) {
      await call(`/v1/batches/${Batch.parse(reply.body).id}/cancel`, { token: limited.key.secret, body: {} });
    }
    expectError(await create(limited.key.secret, "still-full"), 429, "batch_storage_limit");
    await query("UPDATE batches SET purged_at = now() WHERE account_id = $1", [limited.accountId]);
    expect((await create(limited.key.secret, "after-purge")).status).toBe(201);
  });
});

describe("the signed upload", () => {
  it("stores the file once: a second PUT is refused and the first object stays", async () => {
    const batch = await newBatch(account, jsonl(3));
    const first = await put(batch.upload, jsonl(3));
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ size: jsonl(3).length });
    const second = await put(batch.upload, jsonl(3).replace("ticket 0", "ticket 9"));
    expect(await envelope(second)).toMatchObject({ status: 412, code: "already_uploaded" });
    // The object submit finds is the first one.
    const submitted = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
    expect(submitted.body.input_bytes).toBe(jsonl(3).length);
  });

  it("works with plain curl -T and the returned headers", async () => {
    const batch = await newBatch(account, jsonl(3));
    const dir = mkdtempSync(join(tmpdir(), "svc-upload-"));
    try {
      const file = join(dir, "input.jsonl");
      writeFileSync(file, jsonl(3));
      const headers = Object.entries(batch.upload.headers).flatMap(([name, value]) => ["-H", `${name}: ${value}`]);
      const curl = spawnSync("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", file, ...headers, batch.upload.url], { encoding: "utf8" });
      expect(curl.stdout).toBe("200");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const submitted = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
    expect(submitted.body).toMatchObject({ status: "queued", input_bytes: jsonl(3).length });
  });

  it("refuses a tampered URL, a URL for another object, and a PUT without the signed header", async () => {
    const batch = await newBatch(account);
    const other = await newBatch(account);
    const url = new URL(batch.upload.url);
    const signature = url.searchParams.get("X-Amz-Signature")!;
    const flipped = new URL(url);
    flipped.searchParams.set("X-Amz-Signature", signature.slice(0, -1) + (signature.endsWith("0") ? "1" : "0"));
    const longer = new URL(url);
    longer.searchParams.set("X-Amz-Expires", "86400");
    const elsewhere = new URL(url);
    elsewhere.pathname = `/storage/batches/${other.id}/input.jsonl`;
    for (const tampered of [flipped, longer, elsewhere]) {
      expect(await envelope(await put({ url: tampered.toString(), headers: batch.upload.headers }, jsonl(1)))).toMatchObject({ status: 403, code: "signature_invalid" });
    }
    expect(await envelope(await put(batch.upload, jsonl(1), {}))).toMatchObject({ status: 403, code: "signature_invalid" });
    // None of them stored anything: the real upload still works.
    expect((await put(batch.upload, jsonl(1))).status).toBe(200);
  });

  it("refuses an expired URL", async () => {
    const batch = await newBatch(account);
    const accessKeyId = new URL(batch.upload.url).searchParams.get("X-Amz-Credential")!.split("/")[0]!;
    const grants = { accessKeyId, secretAccessKey: stack().secrets.storage, endpoint: `${stack().baseUrl}/storage` };
    const objectKey = `batches/${batch.id}/input.jsonl`;
    const expired = await signUpload(grants, objectKey, jsonl(1).length, Date.now() - LIMITS.signedUploadValidityMs - 1000);
    expect(await envelope(await put(expired, jsonl(1)))).toMatchObject({ status: 403, code: "grant_expired" });
    // Signed the same way but now: accepted, so the refusal above was the expiry.
    expect((await put(await signUpload(grants, objectKey, jsonl(1).length), jsonl(1))).status).toBe(200);
  });

  it("refuses a body framed both by Content-Length and chunked Transfer-Encoding (422 invalid_request, nothing stored; it was a 500), and names a training's file when it is uploaded twice", async () => {
    const body = jsonl(1);
    const batch = await newBatch(account, body);
    const url = new URL(batch.upload.url);
    // fetch never sends both framings: a raw request does, as a smuggling attempt would.
    const both = await rawHttp(url, "PUT", [["if-none-match", "*"], ["Content-Length", String(body.length)], ["Transfer-Encoding", "chunked"]], `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    expect(statusOf(both)).toBe(422);
    expect(jsonOf(both)).toMatchObject({ error: { code: "invalid_request" } });
    // A body that ends before its Content-Length (the client gone mid-upload): 422 too, nothing stored.
    const longer = await newBatch(account, body + " ".repeat(10));
    const cut = await rawHttp(new URL(longer.upload.url), "PUT", [["if-none-match", "*"], ["Content-Length", String(body.length + 10)]], body);
    expect(statusOf(cut)).toBe(422);
    expect(jsonOf(cut)).toMatchObject({ error: { code: "invalid_request", message: "the body ended before its Content-Length; nothing was stored" } });
    expect((await put(batch.upload, body)).status).toBe(200);
    expect((await put(longer.upload, body + " ".repeat(10))).status).toBe(200);

    const training = await call<{ upload: { url: string; headers: Record<string, string> } }>("/v1/trainings", { token: account.userToken, body: { idempotency_key: "twice", input_bytes: 3 } });
    expect((await put(training.body.upload, "{}\n")).status).toBe(200);
    const again = await envelope(await put(training.body.upload, "{}\n"));
    expect(again).toMatchObject({ status: 412, code: "already_uploaded" });
    expect(again.message).toMatch(/^this training's file has already been uploaded/);
  });

  it("refuses, through the grant itself, any length but the declared one: a file over 25 MiB, one byte more or less, or no length at all, storing nothing", async () => {
    const body = jsonl(1);
    const batch = await newBatch(account, body);
    // The grant signs content-length (as R2 checks a presigned URL's signed headers): a file of
    // another length, sent with its own, is another request, refused before a byte is written.
    const tooBig = new Uint8Array(LIMITS.bulkFileBytes + 1).fill(0x20);
    for (const wrong of [tooBig, body + " ", body.slice(0, -1)]) {
      const refused = await envelope(await put(batch.upload, wrong, { "if-none-match": "*" }));
      expect(refused).toMatchObject({ status: 403, code: "signature_invalid" });
      expect(refused.message).toContain("content-length is the size declared when it was created");
    }
    // Sent without a length (chunked): the signed header is missing, refused the same way.
    const chunked = await rawHttp(new URL(batch.upload.url), "PUT", [["if-none-match", "*"], ["Transfer-Encoding", "chunked"]], `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    expect(statusOf(chunked)).toBe(403);
    expect(jsonOf(chunked)).toMatchObject({ error: { code: "signature_invalid" } });
    // Nothing was kept: submit finds no input, and the declared file still goes up once.
    expectError(await call(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} }), 409, "upload_incomplete");
    expect((await put(batch.upload, body)).status).toBe(200);
    expect((await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} })).body).toMatchObject({ status: "queued", input_bytes: body.length });
  });

  it("keeps its own 25 MiB bound behind the grant's: a grant signed for more (none is handed out) stores nothing over the limit", async () => {
    const batch = await newBatch(account);
    const accessKeyId = new URL(batch.upload.url).searchParams.get("X-Amz-Credential")!.split("/")[0]!;
    const grants = { accessKeyId, secretAccessKey: stack().secrets.storage, endpoint: `${stack().baseUrl}/storage` };
    const tooBig = new Uint8Array(LIMITS.bulkFileBytes + 1).fill(0x20);
    const oversized = await signUpload(grants, `batches/${batch.id}/input.jsonl`, tooBig.byteLength);
    expect(await envelope(await put(oversized, tooBig))).toMatchObject({ status: 413, code: "payload_too_large" });
    expectError(await call(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} }), 409, "upload_incomplete");
  });
});

/** A body of unknown length (fetch sends it chunked): `text`, or that many spaces in 1 MiB chunks. */
function streamOf(content: string | number): ReadableStream<Uint8Array> {
  let left = typeof content === "string" ? 0 : content;
  let text: string | null = typeof content === "string" ? content : null;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (text !== null) {
        controller.enqueue(new TextEncoder().encode(text));
        text = null;
      } else if (left > 0) {
        const size = Math.min(left, 1024 * 1024);
        controller.enqueue(new Uint8Array(size).fill(0x20));
        left -= size;
      } else controller.close();
    },
  });
}

describe("POST /v1/batches {idempotency_key} alone, as the specification writes it", () => {
  const createBare = (token: string, idempotency_key: string) => call<Batch>("/v1/batches", { token, body: { idempotency_key } });
  /** A batch made with the specification's body, and its upload. */
  async function bareBatch(key = `bare-${randomBytes(6).toString("hex")}`) {
    const reply = await createBare(account.key.secret, key);
    expect(reply.status, JSON.stringify(reply.body)).toBe(201);
    const batch = Batch.parse(reply.body);
    remember(new URL(batch.upload!.url).searchParams.get("X-Amz-Signature")!);
    return batch as Batch & { upload: NonNullable<Batch["upload"]> };
  }

  it("answers 201 with an upload to the edge's own storage that binds no length, and takes the file up to submit and results", async () => {
    const batch = await bareBatch();
    expect(batch).toMatchObject({ status: "uploading", input_bytes: null });
    expect(batch.upload.headers).toEqual({ "if-none-match": "*" });
    const url = new URL(batch.upload.url);
    expect(url.origin + url.pathname).toBe(`${stack().baseUrl}/storage/batches/${batch.id}/input.jsonl`);
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("host;if-none-match");
    expect((await put(batch.upload, jsonl(3))).status).toBe(200);
    // The repeat names the same batch, with no upload once the input is there.
    const again = await createBare(account.key.secret, batch.idempotency_key);
    expect(again.status).toBe(200);
    expect(Batch.parse(again.body).id).toBe(batch.id);
    expect(Batch.parse(again.body).upload).toBeUndefined();
    const submitted = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
    expect(submitted.body).toMatchObject({ status: "queued", input_bytes: jsonl(3).length });
  });

  it("a repeat before the upload gets a fresh unbounded grant; a repeat that declares a size binds it, and a batch that declared one keeps it", async () => {
    const batch = await bareBatch();
    const again = Batch.parse((await createBare(account.key.secret, batch.idempotency_key)).body);
    expect(again.upload!.headers).toEqual({ "if-none-match": "*" });
    const sized = Batch.parse((await create(account.key.secret, batch.idempotency_key, jsonl(2).length)).body);
    expect(sized.upload!.headers).toMatchObject({ "content-length": String(jsonl(2).length) });
    // Declared at create: a repeat without a size is granted that size, never an unbounded upload.
    const declared = await newBatch(account, jsonl(2));
    const repeat = Batch.parse((await createBare(account.key.secret, declared.idempotency_key)).body);
    expect(repeat.upload!.headers).toMatchObject({ "content-length": String(jsonl(2).length) });
  });

  it("refuses an upload past the bulk file limit, with a length or chunked (keeping nothing past the limit), storing nothing", async () => {
    const batch = await bareBatch();
    const tooBig = new Uint8Array(LIMITS.bulkFileBytes + 1).fill(0x20);
    expect(await envelope(await put(batch.upload, tooBig))).toMatchObject({ status: 413, code: "payload_too_large" });
    // Chunked, as `curl -T -` sends a pipe: nothing past the limit is kept, and the file is refused.
    const chunked = await fetch(batch.upload.url, { method: "PUT", headers: batch.upload.headers, body: streamOf(LIMITS.bulkFileBytes + 1), duplex: "half" } as RequestInit);
    expect(await envelope(chunked)).toMatchObject({ status: 413, code: "payload_too_large" });
    expectError(await call(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} }), 409, "upload_incomplete");
    // A chunked file within the limit is stored whole.
    const body = jsonl(5);
    const small = await fetch(batch.upload.url, { method: "PUT", headers: batch.upload.headers, body: streamOf(body), duplex: "half" } as RequestInit);
    expect(small.status).toBe(200);
    expect((await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} })).body).toMatchObject({ status: "queued", input_bytes: Buffer.byteLength(body) });
  });
});

describe("submit", () => {
  it("needs the upload, moves the batch to queued once, and freezes the models the account could use", async () => {
    const batch = await newBatch(account, jsonl(4));
    expectError(await call(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} }), 409, "upload_incomplete");
    expect((await put(batch.upload, jsonl(4))).status).toBe(200);
    const submitted = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
    expect(submitted.status).toBe(200);
    expect(submitted.body).toMatchObject({ id: batch.id, status: "queued", input_bytes: jsonl(4).length });
    expect(submitted.body.submitted_at).not.toBeNull();
    const frozen = async () => (await query<{ models: { releases: Record<string, string>; aliases: Record<string, string> } }>("SELECT models FROM batches WHERE id = $1", [batch.id]))[0]!.models;
    const models = await frozen();
    expect(models.aliases[SHARED_ALIAS]).toBe(stack().releaseId);
    expect(Object.keys(models.releases)).toContain(stack().releaseId);
    // A repeat changes nothing of the submit: not its time, size or frozen models, and it never
    // sends the batch back to queued. (The worker may have moved it on meanwhile: its status is the worker's.)
    const again = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: batch.id, submitted_at: submitted.body.submitted_at, input_bytes: submitted.body.input_bytes, created_at: submitted.body.created_at });
    expect(["queued", "validating", "running", "completed"]).toContain(again.body.status);
    expect(await frozen()).toEqual(models);
    expect(await query("SELECT id FROM batches WHERE id = $1", [batch.id])).toHaveLength(1);
  });

  it("refuses to start a batch that was cancelled before it was submitted", async () => {
    const batch = await newBatch(account);
    expect((await put(batch.upload, jsonl(1))).status).toBe(200);
    await call(`/v1/batches/${batch.id}/cancel`, { token: account.key.secret, body: {} });
    expectError(await call(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} }), 409, "batch_not_submittable");
  });
});

describe("status, cancel and list", () => {
  it("cancels any non-terminal batch once; a terminal batch answers unchanged", async () => {
    const batch = await newBatch(account);
    const cancelled = await call<Batch>(`/v1/batches/${batch.id}/cancel`, { token: account.key.secret, body: {} });
    expect(cancelled.body).toMatchObject({ status: "cancelled" });
    expect(cancelled.body.finished_at).not.toBeNull();
    // An empty body is accepted as {}.
    const again = await call<Batch>(`/v1/batches/${batch.id}/cancel`, { method: "POST", token: account.key.secret, rawBody: "" });
    expect(again.body).toEqual(cancelled.body);
    const done = await newBatch(account);
    await finishWith(done.id, 1);
    const unchanged = await call<Batch>(`/v1/batches/${done.id}/cancel`, { token: account.key.secret, body: {} });
    expect(unchanged.body.status).toBe("completed");
    expect(Batch.parse((await call(`/v1/batches/${batch.id}`, { token: account.key.secret })).body)).toEqual(cancelled.body);
  });

  it("lists the account's batches newest first, page by page", async () => {
    const mine = await newAccount();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await newBatch(mine)).id);
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const reply: Reply = await call(`/v1/batches?limit=2${after ? `&after=${after}` : ""}`, { token: mine.key.secret });
      const page = BatchList.parse(reply.body);
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((b) => b.id));
      expect(page.has_more).toBe(page.next_cursor !== null);
      after = page.next_cursor;
    } while (after);
    expect(seen).toEqual([...made].reverse());
    expectError(await call("/v1/batches?limit=0", { token: mine.key.secret }), 422, "invalid_request");
    expectError(await call("/v1/batches?after=nope", { token: mine.key.secret }), 422, "invalid_request");
  });
});

describe("metadata and the status filter", () => {
  it("keeps the caller's pairs given at create and returns them everywhere the batch is; lists by status", async () => {
    const mine = await newAccount();
    const metadata = { ticket: "T-1042", team: "billing", "": "x" };
    const refusedEmptyKey = await call("/v1/batches", { token: mine.key.secret, body: { idempotency_key: "m0", input_bytes: 10, metadata } });
    expectError(refusedEmptyKey, 422, "invalid_request");
    for (const bad of [
      Object.fromEntries(Array.from({ length: METADATA_LIMITS.pairs + 1 }, (_, i) => [`k${i}`, "v"])),
      { ["k".repeat(METADATA_LIMITS.keyChars + 1)]: "v" },
      { ticket: "v".repeat(METADATA_LIMITS.valueChars + 1) },
      { ticket: 42 },
      ["T-1042"],
    ]) {
      expectError(await call("/v1/batches", { token: mine.key.secret, body: { idempotency_key: "m1", input_bytes: 10, metadata: bad } }), 422, "invalid_request");
    }
    const pairs = { ticket: "T-1042", team: "billing" };
    const created = await call<Batch>("/v1/batches", { token: mine.key.secret, body: { idempotency_key: "m2", input_bytes: jsonl(1).length, metadata: pairs } });
    expect(created.status).toBe(201);
    expect(created.body.metadata).toEqual(pairs);
    const plain = Batch.parse((await create(mine.key.secret, "m3")).body);
    expect(plain.metadata).toBeNull();
    expect((await put(created.body.upload!, jsonl(1))).status).toBe(200);
    expect(Batch.parse((await call(`/v1/batches/${created.body.id}/submit`, { token: mine.key.secret, body: {} })).body).metadata).toEqual(pairs);
    expect(Batch.parse((await call(`/v1/batches/${created.body.id}`, { token: mine.key.secret })).body).metadata).toEqual(pairs);
    await call(`/v1/batches/${plain.id}/cancel`, { token: mine.key.secret, body: {} });

    const listed = (status?: string) => call(`/v1/batches${status ? `?status=${status}` : ""}`, { token: mine.key.secret });
    expect(BatchList.parse((await listed()).body).data.map((b) => [b.id, b.metadata])).toEqual([
      [plain.id, null],
      [created.body.id, pairs],
    ]);
    expect(BatchList.parse((await listed("cancelled")).body).data.map((b) => b.id)).toEqual([plain.id]);
    expect(BatchList.parse((await listed("uploading")).body).data).toEqual([]);
    expectError(await listed("done"), 422, "invalid_request");
  });
});

describe("results", () => {
  it("are served only once the batch is terminal, 20 per page in input order, the committed text verbatim", async () => {
    const batch = await newBatch(account);
    expectError(await call(`/v1/batches/${batch.id}/results`, { token: account.key.secret }), 409, "batch_not_finished");
    await finishWith(batch.id, 45);
    const lines: string[] = [];
    let after: number | null = 0;
    const texts: string[] = [];
    while (after !== null) {
      const res = await fetch(`${stack().baseUrl}/v1/batches/${batch.id}/results?after=${after}`, { headers: { authorization: `Bearer ${account.key.secret}` } });
      expect(res.status).toBe(200);
      const text = await res.text();
      texts.push(text);
      const page = ResultsPage.parse(JSON.parse(text));
      expect(page.data.length).toBeLessThanOrEqual(20);
      lines.push(...page.data.map((r) => r.custom_id));
      after = page.next_cursor;
    }
    expect(lines).toEqual(Array.from({ length: 45 }, (_, i) => `r${i + 1}`));
    expect(texts).toHaveLength(3);
    expect(texts[0]).toContain('"answers":{"10":{"type":"noul","noul":0.5},"2":');
    // The cursor is a line number: past the most lines a batch can have it is no earlier page's (the document says so too).
    for (const bad of ["-1", "x", "1.5", "99999999999", String(LIMITS.bulkFileRecords + 1), "539933848024"]) {
      expectError(await call(`/v1/batches/${batch.id}/results?after=${bad}`, { token: account.key.secret }), 422, "invalid_request");
    }
  });

  it("answer 410 seven days after the batch finished, even before cleanup", async () => {
    const batch = await newBatch(account);
    await finishWith(batch.id, 1, LIMITS.bulkDataRetentionMs + 1000);
    expectError(await call(`/v1/batches/${batch.id}/results`, { token: account.key.secret }), 410, "results_expired");
    const status = Batch.parse((await call(`/v1/batches/${batch.id}`, { token: account.key.secret })).body);
    expect(Date.parse(status.results_expire_at!)).toBeLessThan(Date.now());
  });
});

describe("access", () => {
  it("lets any valid key of the account poll, cancel and read, even after the creating key is revoked", async () => {
    const owner = await newAccount();
    const batch = await newBatch(owner);
    await finishWith(batch.id, 2);
    const second = await createKey(owner.userToken, "second");
    expect((await call(`/v1/keys/${owner.key.id}/revoke`, { token: owner.userToken, body: {} })).status).toBe(200);
    expectError(await call(`/v1/batches/${batch.id}`, { token: owner.key.secret }), 401, "revoked_key");
    expect((await call(`/v1/batches/${batch.id}`, { token: second.secret })).status).toBe(200);
    expect((await call(`/v1/batches/${batch.id}/results`, { token: second.secret })).status).toBe(200);
    expect((await call(`/v1/batches/${batch.id}/cancel`, { token: second.secret, body: {} })).status).toBe(200);
  });

  it("answers another account's batch with the same 404 as an unknown id, on every route", async () => {
    const batch = await newBatch(account);
    const stranger = await newAccount();
    const unknown = crypto.randomUUID();
    for (const [method, suffix] of [["GET", ""], ["POST", "/submit"], ["POST", "/cancel"], ["GET", "/results"]] as const) {
      const theirs = await call(`/v1/batches/${batch.id}${suffix}`, { method, token: stranger.key.secret, ...(method === "POST" ? { body: {} } : {}) });
      const none = await call(`/v1/batches/${unknown}${suffix}`, { method, token: stranger.key.secret, ...(method === "POST" ? { body: {} } : {}) });
      const malformed = await call(`/v1/batches/not-a-uuid${suffix}`, { method, token: stranger.key.secret, ...(method === "POST" ? { body: {} } : {}) });
      for (const reply of [theirs, none, malformed]) expectError(reply, 404, "not_found");
      expect(theirs.body).toEqual(none.body);
      expect(malformed.body).toEqual(none.body);
    }
    const listed = BatchList.parse((await call("/v1/batches", { token: stranger.key.secret })).body);
    expect(listed.data).toEqual([]);
    // Nothing changed for the owner.
    expect(Batch.parse((await call(`/v1/batches/${batch.id}`, { token: account.key.secret })).body).status).toBe("uploading");
  });
});

describe("security of every bulk route", () => {
  let batchId = "00000000-0000-4000-8000-000000000000";
  beforeAll(async () => {
    batchId = (await newBatch(account)).id;
  });
  // A first create answers 201, its replay (the same idempotency key) 200; another account's batch is a 404.
  apiKeyRouteSecurity({ method: "POST", path: "/v1/batches", body: { idempotency_key: "security", input_bytes: 100 }, ok: [200, 201] });
  apiKeyRouteSecurity({ method: "GET", path: "/v1/batches" });
  apiKeyRouteSecurity(() => ({ method: "GET", path: `/v1/batches/${batchId}`, ok: 404 }));
  apiKeyRouteSecurity(() => ({ method: "POST", path: `/v1/batches/${batchId}/submit`, body: {}, ok: 404 }));
  apiKeyRouteSecurity(() => ({ method: "POST", path: `/v1/batches/${batchId}/cancel`, body: {}, ok: 404 }));
  apiKeyRouteSecurity(() => ({ method: "GET", path: `/v1/batches/${batchId}/results`, ok: 404 }));
});
