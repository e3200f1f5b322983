/**
 * The edge's own storage endpoint (runs in workerd): an object read, written or deleted through a
 * signed grant (server-shared/grants.ts) over the R2 binding. This is where grants point unless STORAGE_ENDPOINT
 * sends them straight to R2's S3 endpoint, which accepts the same URLs. No API key: the signed URL
 * is the credential, and it is never logged.
 *
 *   PUT /storage/batches/<id>/input.jsonl?X-Amz-...   (headers: if-none-match: *)
 *     -> 200 {"key", "size", "etag"}; 403 bad or expired signature; 411 no Content-Length;
 *        413 over LIMITS.bulkFileBytes (trainingFileBytes for a training file); 412 `already_uploaded` when the object exists (kept intact)
 *   GET    /storage/...?X-Amz-...  -> the object's bytes; 404 when there is none
 *   DELETE /storage/...?X-Amz-...  -> 204 (also when there was none)
 */
import { Hono, type Context } from "hono";
import { LIMITS } from "../../contract/limits.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { verifyGrant } from "../../server-shared/grants.ts";
import { UPLOAD_OBJECT, STORAGE_PATH, storageGrants } from "../storage.ts";

export const storage = new Hono<AppEnv>();

/** The object key a request's grant names, once the grant is verified against this endpoint. */
async function grantedKey(c: Context<AppEnv>): Promise<string> {
  const key = await verifyGrant({ ...storageGrants(c), endpoint: `${new URL(c.req.url).origin}${STORAGE_PATH}` }, c.req.raw);
  if (!UPLOAD_OBJECT.test(key)) throw new ServiceError("not_found", "no such storage object");
  return key;
}

storage.get(`${STORAGE_PATH}/*`, async (c) => {
  const object = await c.env.BUCKET.get(await grantedKey(c));
  if (!object) throw new ServiceError("not_found", "no such storage object");
  return c.body(object.body, 200, { "content-type": "application/octet-stream", "content-length": String(object.size) });
});

storage.delete(`${STORAGE_PATH}/*`, async (c) => {
  await c.env.BUCKET.delete(await grantedKey(c));
  return c.body(null, 204);
});

storage.put(`${STORAGE_PATH}/*`, async (c) => {
  const key = await grantedKey(c);
  const length = c.req.header("content-length");
  if (length === undefined || !/^\d{1,12}$/.test(length)) throw new ServiceError("length_required", "send the file with a Content-Length header (curl -T does)");
  const [holds, max] = key.startsWith("trainings/") ? ["a training file", LIMITS.trainingFileBytes] : ["a batch input", LIMITS.bulkFileBytes];
  if (Number(length) > max) {
    // Nothing is stored. A body up to twice the limit is read and dropped first, so that a client
    // still sending gets the 413 rather than a reset connection; a larger one is answered at once.
    if (Number(length) <= 2 * max) await drain(c.req.raw.body);
    throw new ServiceError("payload_too_large", `the file is ${length} bytes; ${holds} holds at most ${max} bytes`);
  }
  // Written only when no object exists yet: a second PUT never replaces the first.
  const stored = await c.env.BUCKET.put(key, c.req.raw.body ?? "", {
    onlyIf: new Headers({ "if-none-match": "*" }),
    httpMetadata: { contentType: "application/jsonl" },
  });
  if (stored === null) throw new ServiceError("already_uploaded", "this batch's input has already been uploaded and cannot be replaced; submit it, or create a new batch for another file");
  return c.json({ key, size: stored.size, etag: stored.etag });
});

/** Reads a body to its end and drops it. */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  while (!(await reader.read()).done);
}
