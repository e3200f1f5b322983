/**
 * The edge's own storage endpoint (runs in workerd): an object read, written or deleted through a
 * signed grant (server-shared/grants.ts) over the R2 binding. This is where grants point unless STORAGE_ENDPOINT
 * sends them straight to R2's S3 endpoint, which accepts the same URLs. No API key: the signed URL
 * is the credential, and it is never logged.
 *
 *   PUT /storage/batches/<id>/input.jsonl?X-Amz-...   (headers: if-none-match: *, and content-length when signed)
 *     -> 200 {"key", "size", "etag"}; 403 bad or expired signature; 411 neither Content-Length nor chunked;
 *        413 over the object's limit (edge/storage.ts objectKind), a chunked body keeping nothing past it;
 *        412 `already_uploaded` when the object exists (kept intact)
 *   PUT /storage/images/<id>/source?X-Amz-...   (headers: content-length, if-none-match: *, x-amz-checksum-sha256)
 *     -> the same, and 400 `checksum_mismatch` when the bytes' SHA-256 is not the signed one (nothing stored)
 *   GET    /storage/...?X-Amz-...  -> the object's bytes; 404 when there is none
 *   DELETE /storage/...?X-Amz-...  -> 204 (also when there was none)
 */
import { Hono, type Context } from "hono";
import { ServiceError } from "../../server-shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { verifyGrant } from "../../server-shared/grants.ts";
import { objectKind, UPLOAD_OBJECT, STORAGE_PATH, storageGrants } from "../storage.ts";
import { sha256Hex } from "../../server-shared/crypto.ts";

export const storage = new Hono<AppEnv>();

/** The object key a request's grant names, once the grant is verified against this endpoint. */
async function grantedKey(c: Context<AppEnv>): Promise<string> {
  // The signature covers the URL's host, so a grant verifies only where it was signed to point; the
  // endpoint here only says where the object's key starts in the path.
  const key = await verifyGrant({ ...storageGrants(c, "clients"), endpoint: `${new URL(c.req.url).origin}${STORAGE_PATH}` }, c.req.raw);
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
  // Both framings at once is a request smuggling shape (RFC 9112 6.3): refused, never guessed at.
  if (c.req.header("transfer-encoding") !== undefined && length !== undefined) {
    throw new ServiceError("invalid_request", "send the file with Content-Length or chunked Transfer-Encoding, not both");
  }
  const { holds, maxBytes, image, uploaded } = objectKind(key);
  // A batch's or training's file may come chunked (`curl -T -` from a pipe): nothing past its limit
  // is held, and a larger file is refused (413) with nothing stored.
  if (length === undefined && image === null && c.req.raw.body !== null) {
    const bytes = await readAtMost(c.req.raw.body, maxBytes, () => new ServiceError("payload_too_large", `the file is larger than ${maxBytes} bytes; ${holds} holds at most ${maxBytes} bytes`));
    return stored(c, key, bytes, image, uploaded);
  }
  if (length === undefined || !/^\d{1,12}$/.test(length)) throw new ServiceError("length_required", "send the file with a Content-Length header (curl -T does)");
  if (Number(length) > maxBytes) {
    // Nothing is stored. A body up to twice the limit is read and dropped first, so that a client
    // still sending gets the 413 rather than a reset connection; a larger one is answered at once.
    if (Number(length) <= 2 * maxBytes) await drain(c.req.raw.body);
    throw new ServiceError("payload_too_large", `the file is ${length} bytes; ${holds} holds at most ${maxBytes} bytes`);
  }
  // An image's original is bound to the SHA-256 its grant signed (x-amz-checksum-sha256, as R2's
  // own S3 endpoint checks it): the bytes are hashed before anything is written, and R2 keeps the
  // checksum for completion to compare.
  // A body that ends before its Content-Length (a client gone mid-upload) stores nothing, and is the
  // request's fault: 422, never a 500.
  const cutShort = () => new ServiceError("invalid_request", "the body ended before its Content-Length; nothing was stored");
  let body: ReadableStream<Uint8Array> | Uint8Array | string = "";
  let received: Promise<boolean> = Promise.resolve(true);
  if (c.req.raw.body && image !== "source") {
    const fixed = new FixedLengthStream(Number(length));
    received = c.req.raw.body.pipeTo(fixed.writable).then(
      () => true,
      () => false,
    );
    body = fixed.readable;
  }
  let sha256: string | undefined;
  if (image === "source") {
    const declared = c.req.header("x-amz-checksum-sha256") ?? "";
    const bytes = new Uint8Array(
      await c.req.arrayBuffer().catch(() => {
        throw cutShort();
      }),
    );
    if (bytes.byteLength !== Number(length)) throw new ServiceError("invalid_request", "the body's length is not its Content-Length");
    sha256 = await sha256Hex(bytes);
    if (base64ToHex(declared) !== sha256) {
      throw new ServiceError("checksum_mismatch", "the file's SHA-256 is not the one the asset was created with; nothing was stored (create a new asset for another file)");
    }
    body = bytes;
  }
  try {
    return await stored(c, key, body, image, uploaded, sha256);
  } catch (err) {
    if (!(await received)) throw cutShort();
    throw err;
  }
});

/** Writes the object only when none exists yet (a second PUT never replaces the first); 200 with what was stored. */
async function stored(
  c: Context<AppEnv>,
  key: string,
  body: ReadableStream<Uint8Array> | Uint8Array | string,
  image: "source" | "canonical" | null,
  uploaded: string,
  sha256?: string,
): Promise<Response> {
  const object = await c.env.BUCKET.put(key, body, {
    onlyIf: new Headers({ "if-none-match": "*" }),
    httpMetadata: { contentType: image === null ? "application/jsonl" : image === "canonical" ? "image/png" : "application/octet-stream" },
    ...(sha256 ? { sha256 } : {}),
  });
  if (object === null) throw new ServiceError("already_uploaded", uploaded);
  return c.json({ key, size: object.size, etag: object.etag });
}

/**
 * A body's bytes, read until its end; past `maxBytes` nothing more is kept and `tooLarge()` is thrown,
 * once the rest is read and dropped (up to twice the limit, so that a client still sending gets the
 * answer rather than a reset connection) or at once beyond that.
 */
async function readAtMost(body: ReadableStream<Uint8Array> | null, maxBytes: number, tooLarge: () => Error): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (body) {
    const reader = body.getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      size += next.value.byteLength;
      if (size > 2 * maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      if (size <= maxBytes) chunks.push(next.value);
    }
  }
  if (size > maxBytes) throw tooLarge();
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** The hex form of a base64 digest ("" when it is not one). */
function base64ToHex(text: string): string {
  try {
    return [...atob(text)].map((ch) => ch.charCodeAt(0).toString(16).padStart(2, "0")).join("");
  } catch {
    return "";
  }
}

/** Reads a body to its end and drops it. */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  while (!(await reader.read()).done);
}
