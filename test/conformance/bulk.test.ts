/**
 * Conformance of bulk jobs to ../shared/spec/decision-service.md, as a client that creates with
 * `{idempotency_key}` alone, PUTs to exactly the returned `upload.url` with exactly `upload.headers`,
 * and reads status and results without the field names the specification leaves unshown. The stack's
 * bulk worker runs every submitted batch; the ones most tests read are submitted before the first
 * test, so the worker answers them while the tests that need no worker run.
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import {
  batchState,
  createBatch,
  expectOk,
  expectStatus,
  get,
  jsonl,
  obj,
  post,
  putUpload,
  readResults,
  recordCounts,
  send,
  SpecNoul,
  SpecResultsPage,
  submitted,
  waitTerminal,
  walk,
  type Reply,
} from "./client.ts";
import { account, anotherKey, backdateFinish, type Account } from "./operator.ts";

const SHARED = "svc-shared";
const line = (i: number, customId = `r-${i}`) => ({
  custom_id: customId,
  body: { model: SHARED, state: `ticket ${i}: I was charged twice`, questions: { money: { type: "noul", instructions: "Is it about money?" } } },
});

/** Bodies that are not valid decision requests: their records fail with 422, at no inference. */
const INVALID_BODIES = [
  { model: SHARED, state: "no questions" },
  { model: SHARED, state: "s", questions: { c: { type: "choice", criteria: { only: null } } } },
  { model: SHARED, state: "s", questions: { s: { type: "score", criteria: Array(11).fill("level") } } },
  { model: SHARED, state: "s", questions: { q: { type: "rank" } } },
  { model: SHARED, questions: { q: { type: "noul" } } },
];

/** 21 records (two pages of results): the even ones answered, the odd ones with an invalid body. */
const MAIN = Array.from({ length: 21 }, (_, i) => (i % 2 === 0 ? line(i) : { custom_id: `r-${i}`, body: INVALID_BODIES[(i >> 1) % INVALID_BODIES.length]! }));

/** Files the worker must fail as a whole, at validation. */
const BAD_FILES: [string, string][] = [
  ["an empty file", ""],
  ["malformed JSONL", jsonl([line(0), "{not json"])],
  ["duplicate custom_ids", jsonl([line(0), line(1), line(0)])],
  ["a custom_id that is not a string", jsonl([line(0), { custom_id: 7, body: line(1).body }])],
  ["an empty custom_id", jsonl([{ ...line(0), custom_id: "" }])],
];

let owner: Account;
let stranger: Account;
let key: string;
let main: { id: string; submit: Reply; resubmit: Reply };
let bad: string[];

beforeAll(async () => {
  [owner, stranger] = await Promise.all([account(), account()]);
  key = owner.key.secret;
  const first = await submitted(key, "main", jsonl(MAIN));
  main = { ...first, resubmit: await post(`/v1/batches/${first.id}/submit`, key, {}) };
  bad = await Promise.all(BAD_FILES.map(async ([name, file]) => (await submitted(key, `bad ${name}`, file)).id));
});

const isClientError = (reply: Reply) => reply.status >= 400 && reply.status < 500;

describe("Create and upload", () => {
  it("Endpoints: POST /v1/batches {idempotency_key} gives a batch ID (a UUID), its limits and an upload {url, headers} that carries no API key", async () => {
    const { reply, id, upload } = await createBatch(key, "fresh");
    expect(upload).toBeDefined();
    // The limits: a file of 25 MiB and 10,000 records, 20 records a results page.
    const numbers = [...walk(reply.body)].map(([, v]) => v).filter((v) => typeof v === "number");
    expect(numbers).toEqual(expect.arrayContaining([25 * 1024 * 1024, 10_000, 20]));
    expect(upload!.url).not.toContain(key);
    expect(JSON.stringify(upload!.headers)).not.toContain(key);
    expect(batchState((await get(`/v1/batches/${id}`, key)).body)).toBe("uploading");
  });

  it("Bulk rule 1: repeating create with the same idempotency_key returns the same batch ID, with a fresh upload until the input arrived and none after; submit may then be called directly", async () => {
    const first = await createBatch(key, "rule 1");
    const again = await createBatch(key, "rule 1");
    expect(again.id).toBe(first.id);
    expect(again.upload).toBeDefined();
    const put = await putUpload(again.upload!, jsonl([line(0)]));
    expect(put.ok, `${put.status}: ${await put.clone().text()}`).toBe(true);
    const after = await createBatch(key, "rule 1");
    expect(after.id).toBe(first.id);
    expect(obj(after.reply.body)).not.toHaveProperty("upload");
    const submit = await post(`/v1/batches/${first.id}/submit`, key, {});
    expectOk(submit);
    expect(batchState(submit.body)).not.toBe("uploading");
  });

  it("Bulk rule 2: a changed input goes under a new idempotency_key, which names a new batch with its own upload", async () => {
    const original = await createBatch(key, "rule 2");
    expect((await putUpload(original.upload!, jsonl([line(0)]))).ok).toBe(true);
    expect(obj((await createBatch(key, "rule 2")).reply.body)).not.toHaveProperty("upload");
    const changed = await createBatch(key, "rule 2, changed");
    expect(changed.id).not.toBe(original.id);
    expect(changed.upload).toBeDefined();
  });

  it("Bulk rule 3: the signed PUT cannot replace an already uploaded object; the job reads the first upload", async () => {
    const { id, upload } = await createBatch(key, "rule 3");
    expect((await putUpload(upload!, jsonl([line(0, "first")]))).ok).toBe(true);
    const replaced = await putUpload(upload!, jsonl([line(1, "second")]));
    expect(replaced.ok, `a second PUT answered ${replaced.status}`).toBe(false);
    expectOk(await post(`/v1/batches/${id}/submit`, key, {}));
    expect(batchState(await waitTerminal(key, id))).toBe("completed");
    expect((await readResults(key, id)).records.map((r) => r.custom_id)).toEqual(["first"]);
  });

  it("Bulk rule 4: submit before the upload is complete is refused, and the batch stays uploading", async () => {
    const { id } = await createBatch(key, "rule 4");
    const refused = await post(`/v1/batches/${id}/submit`, key, {});
    expect(isClientError(refused), `${refused.status}: ${refused.text}`).toBe(true);
    expect(batchState((await get(`/v1/batches/${id}`, key)).body)).toBe("uploading");
  });

  it("Bulk rule 6: U+0000 is rejected: in an idempotency_key (422), and in a record of the file, which is never answered", async () => {
    expectStatus(await send("POST", "/v1/batches", { token: key, raw: '{"idempotency_key":"nul\\u0000key"}' }), 422);
    const escaped = '{"custom_id":"nul","body":{"model":"svc-shared","state":"a\\u0000b","questions":{"q":{"type":"noul"}}}}';
    const raw = '{"custom_id":"nul","body":{"model":"svc-shared","state":"a\u0000b","questions":{"q":{"type":"noul"}}}}';
    for (const [name, nul] of [["escaped", escaped], ["raw", raw]]) {
      const { id } = await submitted(key, `rule 6 ${name}`, jsonl([line(0), nul]));
      const done = await waitTerminal(key, id);
      if (batchState(done) === "failed") continue;
      const record = (await readResults(key, id)).records.find((r) => r.custom_id === "nul");
      expect(record && "error" in record, `${name}: ${JSON.stringify(record)}`).toBe(true);
    }
  });
});

describe("Access", () => {
  it("Authentication rule 3 / Errors: bulk takes an API key: no credential or the user's access token gets 401", async () => {
    expectStatus(await post("/v1/batches", undefined, { idempotency_key: "nobody" }), 401);
    expectStatus(await post("/v1/batches", owner.userToken, { idempotency_key: "user" }), 401);
    expectStatus(await get(`/v1/batches/${main.id}`), 401);
    expectStatus(await get(`/v1/batches/${main.id}`, owner.userToken), 401);
    expectStatus(await get(`/v1/batches/${main.id}/results?after=0`, owner.userToken), 401);
  });

  it("Bulk rule 7 / Errors: another account's batch is 404 on every route, as an unknown batch ID is, and is left as it was", async () => {
    for (const id of [main.id, randomUUID()]) {
      expectStatus(await get(`/v1/batches/${id}`, stranger.key.secret), 404);
      expectStatus(await post(`/v1/batches/${id}/submit`, stranger.key.secret, {}), 404);
      expectStatus(await post(`/v1/batches/${id}/cancel`, stranger.key.secret, {}), 404);
      expectStatus(await get(`/v1/batches/${id}/results?after=0`, stranger.key.secret), 404);
    }
    expect(batchState((await get(`/v1/batches/${main.id}`, key)).body)).not.toBe("cancelled");
  });

  it("Bulk rule 7: another key of the same account may poll, cancel and download a job, even after the submitting key was revoked", async () => {
    const team = await account();
    const other = await anotherKey(team);
    const running = await submitted(team.key.secret, "rule 7", jsonl([line(0), line(1)]));
    const open = await createBatch(team.key.secret, "rule 7, open");
    expectOk(await post(`/v1/keys/${team.key.id}/revoke`, team.userToken, {}));
    expectStatus(await get(`/v1/batches/${running.id}`, team.key.secret), 401);
    expect(batchState(await waitTerminal(other.secret, running.id))).toBe("completed");
    expect((await readResults(other.secret, running.id)).records.map((r) => r.custom_id)).toEqual(["r-0", "r-1"]);
    const cancelled = await post(`/v1/batches/${open.id}/cancel`, other.secret, {});
    expectOk(cancelled);
    expect(batchState(cancelled.body)).toBe("cancelled");
  });
});

describe("States, status and results", () => {
  it("Bulk rule 5: results are served only for terminal jobs", async () => {
    const { id } = await createBatch(key, "rule 5, not terminal");
    const early = await get(`/v1/batches/${id}/results?after=0`, key);
    expect(isClientError(early), `${early.status}: ${early.text}`).toBe(true);
    expect(batchState(obj((await post(`/v1/batches/${id}/cancel`, key, {})).body))).toBe("cancelled");
    expect((await readResults(key, id)).records).toEqual([]);
  });

  it("Bulk states: uploading -> queued on submit; a repeated submit changes nothing and does not duplicate the job", async () => {
    expect(batchState(main.submit.body)).toBe("queued");
    expectOk(main.resubmit);
    expect(batchState(main.resubmit.body)).not.toBe("uploading");
    const done = await waitTerminal(key, main.id);
    expect(batchState(done)).toBe("completed");
    const again = await post(`/v1/batches/${main.id}/submit`, key, {});
    expectOk(again);
    expect(obj((await get(`/v1/batches/${main.id}`, key)).body)).toEqual(done);
    const { records } = await readResults(key, main.id);
    expect(records.map((r) => r.custom_id)).toEqual(MAIN.map((r) => r.custom_id));
  });

  it("Bulk status: GET /v1/batches/{id} carries the status, timestamps and the total, completed and failed record counts", async () => {
    const done = await waitTerminal(key, main.id);
    expect(recordCounts(done)).toEqual({ total: 21, completed: 11, failed: 10 });
    const timestamps = [...walk(done)].map(([, v]) => v).filter((v) => typeof v === "string" && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(v) && !Number.isNaN(Date.parse(v)));
    // At least when it was created and when it finished.
    expect(timestamps.length, JSON.stringify(done)).toBeGreaterThanOrEqual(2);
    const { id } = await createBatch(key, "status while uploading");
    expect(recordCounts((await get(`/v1/batches/${id}`, key)).body)).toEqual({ total: 0, completed: 0, failed: 0 });
  });

  it("Bulk result records: exactly {custom_id, response} or {custom_id, error:{status, code, message}}, status 422 for an invalid body; a completed job may contain failed records", async () => {
    await waitTerminal(key, main.id);
    const { records } = await readResults(key, main.id);
    for (const [i, record] of records.entries()) {
      if (i % 2 === 1) {
        expect(record, JSON.stringify(record)).toMatchObject({ error: { status: 422 } });
      } else {
        if (!("response" in record)) throw new Error(`record ${i} is not an answer: ${JSON.stringify(record)}`);
        expect(Object.keys(record.response.answers)).toEqual(["money"]);
        SpecNoul.parse(record.response.answers.money);
      }
    }
  });

  it("Bulk rule 5 / Limits: results come in pages of up to 20 records with next_cursor, from after=0, in input order", async () => {
    await waitTerminal(key, main.id);
    const { pages, records } = await readResults(key, main.id);
    expect(pages.length).toBeGreaterThanOrEqual(2);
    for (const page of pages) expect(page.length).toBeLessThanOrEqual(20);
    expect(pages[0]!.length).toBeGreaterThan(0);
    expect(records.map((r) => r.custom_id)).toEqual(MAIN.map((r) => r.custom_id));
  });

  it("Bulk rule 5: the current key is rechecked on every page", async () => {
    await waitTerminal(key, main.id);
    const reader = await anotherKey(owner, "page reader");
    const first = await get(`/v1/batches/${main.id}/results?after=0`, reader.secret);
    expectStatus(first, 200);
    const next = SpecResultsPage.parse(first.body).next_cursor;
    expect(next).not.toBeNull();
    expectOk(await post(`/v1/keys/${reader.id}/revoke`, owner.userToken, {}));
    expectStatus(await get(`/v1/batches/${main.id}/results?after=${next}`, reader.secret), 401);
    expectStatus(await get(`/v1/batches/${main.id}/results?after=${next}`, key), 200);
  });

  it("Bulk states: cancel stops new work and keeps the committed results; unfinished records are omitted", async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `c-${i}`);
    const { id } = await submitted(key, "cancel", jsonl(ids.map((c, i) => line(i, c))));
    const cancelled = await post(`/v1/batches/${id}/cancel`, key, {});
    expectOk(cancelled);
    expect(batchState(cancelled.body)).toBe("cancelled");
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const later = (await get(`/v1/batches/${id}`, key)).body;
    expect(batchState(later)).toBe("cancelled");
    const counts = recordCounts(later);
    expect(counts).toEqual(recordCounts(cancelled.body));
    const { records } = await readResults(key, id);
    expect(records).toHaveLength(counts.completed + counts.failed);
    expect(records.length).toBeLessThan(ids.length);
    // Committed records, in input order.
    const positions = records.map((r) => ids.indexOf(r.custom_id));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    expect(positions.every((p) => p >= 0)).toBe(true);
  });

  it.each(BAD_FILES.map(([name], i) => [name, i] as const))("Bulk states: validating -> failed for %s; no inference runs", async (_name, i) => {
    const done = await waitTerminal(key, bad[i]!);
    expect(batchState(done)).toBe("failed");
    expect(recordCounts(done).completed).toBe(0);
    expect((await readResults(key, bad[i]!)).records).toEqual([]);
  });

  it("Errors: 410 for results requested after the retention period (seven days after a terminal state), even if cleanup is delayed", async () => {
    const { id } = await createBatch(key, "retention");
    expectOk(await post(`/v1/batches/${id}/cancel`, key, {}));
    expectStatus(await get(`/v1/batches/${id}/results?after=0`, key), 200);
    await backdateFinish(id, 7 * 24 * 3600 * 1000 + 1000);
    expectStatus(await get(`/v1/batches/${id}/results?after=0`, key), 410);
  });
});
