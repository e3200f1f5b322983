/**
 * The conformance suite's client (runs only in tests): plain `fetch` against the shared stack that
 * sends only what ../shared/spec/decision-service.md names, and readers that find what the
 * specification describes without the field names it leaves unshown (a batch's status and record
 * counts, the records of a results page, a choice answer's probabilities). The specification's own
 * field names are checked with the small schemas below; operator-side setup is in operator.ts.
 *
 *     const created = await post("/v1/batches", key, { idempotency_key: "k" });
 *     await putUpload(SpecUpload.parse(obj(created.body).upload), file);
 *     const done = await waitTerminal(key, id);   // batchState(done) === "completed"
 */
import { createHash } from "node:crypto";
import { expect } from "vitest";
import { z } from "zod";
import { remember, stack } from "../support/api.ts";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON; null when it is not JSON. */
  body: Json;
}

export async function send(method: "GET" | "POST", path: string, opts: { token?: string; json?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  const body = opts.raw ?? (opts.json === undefined ? undefined : JSON.stringify(opts.json));
  if (body !== undefined) headers["content-type"] = "application/json";
  const go = () => fetch(`${stack().baseUrl}${path}`, { method, headers, body });
  // A GET on a kept-alive connection the server closed at that moment fails before any answer: sent
  // again once, as HTTP clients retry an idempotent request (test/support/api.ts `call` does the same).
  const res = await go().catch((err: unknown) => {
    if (method === "GET" && (err as { cause?: { code?: string } }).cause?.code === "UND_ERR_SOCKET") return go();
    throw err;
  });
  const text = await res.text();
  let parsed: Json = null;
  try {
    parsed = JSON.parse(text) as Json;
  } catch {}
  return { status: res.status, headers: res.headers, text, body: parsed };
}

export const get = (path: string, token?: string) => send("GET", path, { token });
export const post = (path: string, token: string | undefined, json: unknown) => send("POST", path, { token, json });

/** The reply's status, with its body in the failure message. */
export function expectStatus(reply: Reply, status: number): void {
  expect(reply.status, reply.text.slice(0, 500)).toBe(status);
}

export function expectOk(reply: Reply): void {
  expect(reply.status >= 200 && reply.status < 300, `${reply.status}: ${reply.text.slice(0, 500)}`).toBe(true);
}

export function obj(value: Json | undefined): JsonObject {
  if (value === null || value === undefined || typeof value !== "object" || Array.isArray(value)) throw new Error(`not a JSON object: ${JSON.stringify(value)?.slice(0, 300)}`);
  return value;
}

/** Every value inside `value` (itself included), with its path of keys. */
export function* walk(value: Json, path: string[] = []): Generator<[string[], Json]> {
  yield [path, value];
  if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) yield* walk(inner, [...path, key]);
  }
}

export const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

// What the specification names, as schemas: unnamed fields are allowed everywhere but in a bulk result record.

export const SpecUsage = z.looseObject({
  input_tokens: z.int().nonnegative(),
  output_tokens: z.int().nonnegative(),
  billable_input_tokens: z.int().nonnegative().optional(),
});

export const SpecDecision = z.looseObject({
  model: z.string().min(1),
  answers: z.record(z.string(), z.looseObject({})),
  usage: SpecUsage,
});

export const SpecNoul = z.looseObject({ type: z.literal("noul"), noul: z.number().min(0).max(1) });

export const SpecResultRecord = z.union([
  z.strictObject({ custom_id: z.string(), response: SpecDecision }),
  z.strictObject({ custom_id: z.string(), error: z.strictObject({ status: z.int(), code: z.string().min(1), message: z.string().min(1) }) }),
]);
export type SpecResultRecord = z.infer<typeof SpecResultRecord>;

export const SpecUpload = z.looseObject({ url: z.url(), headers: z.record(z.string(), z.string()) });
export type SpecUpload = z.infer<typeof SpecUpload>;

/** A batch as created: identified by a UUID, with an upload while no input has arrived. */
export const SpecBatchCreated = z.looseObject({ id: z.uuid(), upload: SpecUpload.optional() });

export const SpecResultsPage = z.looseObject({ next_cursor: z.int().nonnegative().nullable() });

// Decisions

/** A choice answer read the specification's way: the selected option, its probability per option, a confidence. */
export function readChoice(answer: Json, options: string[]): { selected: string; probabilities: Record<string, number>; numbers: number[] } {
  const fields = Object.values(obj(answer));
  const selected = fields.filter((v): v is string => typeof v === "string" && options.includes(v));
  expect(selected, `one field names the selected option: ${JSON.stringify(answer)}`).toHaveLength(1);
  const tables = fields.filter((v) => v !== null && typeof v === "object" && !Array.isArray(v) && sameSet(Object.keys(v), options));
  expect(tables, `one field holds a probability per option: ${JSON.stringify(answer)}`).toHaveLength(1);
  const probabilities = tables[0] as Record<string, number>;
  for (const p of Object.values(probabilities)) expect(p).toBeGreaterThanOrEqual(0);
  expect(Object.values(probabilities).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
  return { selected: selected[0]!, probabilities, numbers: fields.filter((v): v is number => typeof v === "number") };
}

const sameSet = (a: string[], b: string[]) => a.length === b.length && b.every((x) => a.includes(x));

// Bulk

export const BATCH_STATES = ["uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired"] as const;
export const TERMINAL_STATES = ["completed", "failed", "cancelled", "expired"];

/** One JSONL file of these lines (strings are written as they are). */
export const jsonl = (lines: unknown[]) => lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n") + "\n";

/** The batch's state: the one top-level value of the response that names a state. */
export function batchState(body: Json): string {
  const states = Object.values(obj(body)).filter((v) => typeof v === "string" && (BATCH_STATES as readonly string[]).includes(v));
  expect(states, `one state in ${JSON.stringify(body)}`).toHaveLength(1);
  return states[0] as string;
}

/** The total, completed and failed record counts: the numbers whose names say which. */
export function recordCounts(body: Json): { total: number; completed: number; failed: number } {
  const find = (word: string) => {
    const found = [...walk(body)].filter(([path, v]) => typeof v === "number" && path.some((key) => key.toLowerCase().includes(word)));
    expect(found.map(([path]) => path.join(".")), `one ${word} count in ${JSON.stringify(body)}`).toHaveLength(1);
    return found[0]![1] as number;
  };
  return { total: find("total"), completed: find("completed"), failed: find("failed") };
}

export async function createBatch(token: string, idempotencyKey: string): Promise<{ reply: Reply; id: string; upload: SpecUpload | undefined }> {
  const reply = await post("/v1/batches", token, { idempotency_key: idempotencyKey });
  expectOk(reply);
  const batch = SpecBatchCreated.parse(reply.body);
  if (batch.upload) rememberUpload(batch.upload);
  return { reply, id: batch.id, upload: batch.upload };
}

/** The scan of the stack's logs at the end of the run looks for each signed upload URL's query (its signature). */
export function rememberUpload(upload: SpecUpload): SpecUpload {
  const query = new URL(upload.url).search.slice(1);
  if (query.length >= 16) remember(query);
  return upload;
}

/** The PUT to a returned upload: its URL and exactly its headers, nothing else. */
export function putUpload(upload: SpecUpload, body: string | Uint8Array): Promise<Response> {
  return fetch(upload.url, { method: "PUT", headers: upload.headers, body });
}

/** Creates a batch, uploads `file` and submits it; the batch ID and the submit reply. */
export async function submitted(token: string, idempotencyKey: string, file: string): Promise<{ id: string; submit: Reply }> {
  const { id, upload } = await createBatch(token, idempotencyKey);
  expect(upload).toBeDefined();
  const put = await putUpload(upload!, file);
  expect(put.ok, `${put.status}: ${await put.clone().text()}`).toBe(true);
  const submit = await post(`/v1/batches/${id}/submit`, token, {});
  expectOk(submit);
  return { id, submit };
}

/** Polls the batch until it is terminal (at most `timeoutMs`); its last status body. */
export async function waitTerminal(token: string, id: string, timeoutMs = 50_000): Promise<JsonObject> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = await get(`/v1/batches/${id}`, token);
    expectStatus(reply, 200);
    if (TERMINAL_STATES.includes(batchState(reply.body))) return obj(reply.body);
    if (Date.now() > deadline) throw new Error(`batch ${id} not terminal after ${timeoutMs} ms: ${reply.text}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The records of a results page: its one array. */
export function pageRecords(page: Json): SpecResultRecord[] {
  const arrays = Object.values(obj(page)).filter((v) => Array.isArray(v));
  expect(arrays, `one array of records in ${JSON.stringify(page).slice(0, 300)}`).toHaveLength(1);
  return (arrays[0] as Json[]).map((r) => SpecResultRecord.parse(r));
}

/** Every results page from `after=0`, following `next_cursor` until it is null. */
export async function readResults(token: string, id: string): Promise<{ pages: SpecResultRecord[][]; records: SpecResultRecord[] }> {
  const pages: SpecResultRecord[][] = [];
  let after: number | null = 0;
  while (after !== null) {
    if (pages.length > 600) throw new Error("more pages than 10,000 records make");
    const reply = await get(`/v1/batches/${id}/results?after=${after}`, token);
    expectStatus(reply, 200);
    pages.push(pageRecords(reply.body));
    after = SpecResultsPage.parse(reply.body).next_cursor;
  }
  return { pages, records: pages.flat() };
}

// Images

/** The `{url, headers}` object of an image asset's creation (its field name is not shown). */
export function uploadIn(body: Json): SpecUpload {
  const found = [...walk(body)].map(([, v]) => SpecUpload.safeParse(v)).filter((r) => r.success);
  expect(found, `one PUT URL with its headers in ${JSON.stringify(body)}`).toHaveLength(1);
  return rememberUpload(found[0]!.data!);
}

/** Creates, uploads and completes a prediction asset with `token`; its ID. `sha256` is the project's name for the field the specification leaves unnamed (contract/images.ts). */
export async function uploadImage(token: string, bytes: Uint8Array, filename = "photo.png"): Promise<string> {
  const created = await post("/v1/image-assets", token, { purpose: "prediction", filename, source_bytes: bytes.byteLength, sha256: sha256Hex(bytes) });
  expectOk(created);
  const id = z.string().parse(obj(created.body).id);
  const put = await putUpload(uploadIn(created.body), bytes);
  expect(put.ok, `${put.status}: ${await put.clone().text()}`).toBe(true);
  const completed = await post(`/v1/image-assets/${id}/complete`, token, {});
  expectOk(completed);
  return id;
}
