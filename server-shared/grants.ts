/**
 * Storage grants (made and checked by the edge, in workerd): short signed URLs in the S3
 * query-presign format (AWS Signature Version 4, made and checked with aws4fetch), each bound to one
 * object, one method, an expiry and the headers it must be used with. The same URL format works against R2's S3 endpoint, so a deployment
 * may point grants there (STORAGE_ENDPOINT); by default the edge serves them itself at /storage/...
 * over its R2 binding (edge/routes/storage.ts).
 *
 *     const upload = await signUpload(grants, "batches/<id>/input.jsonl", 48213);   // {url, method, headers, expires_at}
 *     const key = await verifyGrant(grants, request);                         // the object key, or 403
 *
 * An upload must carry `if-none-match: *` and, when the job declared its size, its `content-length`
 * (both signed, so neither can be left out or changed): the object is written only when none exists,
 * so a second PUT cannot replace the first, and it is exactly the length declared when the job was
 * created, so the storage itself (R2 checks a signed Content-Length, as /storage does) refuses a
 * larger file. An upload of no declared size is granted on the edge's own /storage only, which
 * bounds every object by its kind's limit (edge/storage.ts). A signed URL is a credential: nothing
 * here or in the routes logs one.
 */
import { AwsV4Signer } from "aws4fetch";
import type { Upload } from "../contract/batches.ts";
import { LIMITS } from "../contract/limits.ts";
import { checkServiceUrl } from "../contract/urls.ts";
import { digestsEqual, sha256Hex } from "./crypto.ts";
import { ServiceError } from "./errors.ts";

export interface StorageGrants {
  accessKeyId: string;
  secretAccessKey: string;
  /** Objects live at `${endpoint}/${key}`: the edge's own /storage or an S3 endpoint with its bucket. */
  endpoint: string;
}

/** The headers an upload of `bytes` (null: not declared) must be sent with (all of them signed). */
export const uploadHeaders = (bytes: number | null): Record<string, string> =>
  bytes === null ? { "if-none-match": "*" } : { "content-length": String(bytes), "if-none-match": "*" };
const REGION = "auto";
const SERVICE = "s3";

/** `20261122T180405Z`, the SigV4 date format. */
const amzDate = (ms: number) => new Date(ms).toISOString().replace(/[:-]|\.\d{3}/g, "");

/** A signed PUT of exactly `bytes` bytes (null: of any size the endpoint takes) to `objectKey`, valid for LIMITS.signedUploadValidityMs from `now`. */
export async function signUpload(grants: StorageGrants, objectKey: string, bytes: number | null, now = Date.now()): Promise<Upload> {
  const headers = uploadHeaders(bytes);
  const url = await signGrant(grants, objectKey, "PUT", LIMITS.signedUploadValidityMs, headers, now);
  return { url, method: "PUT", headers, expires_at: new Date(now + LIMITS.signedUploadValidityMs).toISOString() };
}

/** A signed `method` of `objectKey`, valid for `validityMs` (at most LIMITS.signedUploadValidityMs) from `now`, to be sent with `headers`. */
export async function signGrant(
  grants: StorageGrants,
  objectKey: string,
  method: "PUT" | "GET" | "DELETE",
  validityMs: number,
  headers: Readonly<Record<string, string>> = {},
  now = Date.now(),
): Promise<string> {
  const url = new URL(`${grants.endpoint}/${objectKey.split("/").map(encodeURIComponent).join("/")}`);
  url.searchParams.set("X-Amz-Expires", String(Math.floor(validityMs / 1000)));
  return (await signed(grants, method, url, headers, amzDate(now))).toString();
}

/** `url` with the query signature of `method` and `headers` at `datetime` (any signature already in it replaced). */
async function signed(grants: StorageGrants, method: string, url: URL, headers: Readonly<Record<string, string>>, datetime: string): Promise<URL> {
  const signer = new AwsV4Signer({
    method,
    url: url.toString(),
    headers,
    accessKeyId: grants.accessKeyId,
    secretAccessKey: grants.secretAccessKey,
    service: SERVICE,
    region: REGION,
    datetime,
    signQuery: true,
    // Every header given is signed, Content-Length included (aws4fetch leaves it out by default):
    // an image upload's grant is bound to its length as well as to its checksum.
    allHeaders: true,
  });
  return (await signer.sign()).url;
}

/**
 * Checks a request against the grant its URL carries: the signature (recomputed over the method,
 * the path, the query and the signed headers as sent, compared in constant time), and the expiry.
 * Returns the object key; throws 403 `signature_invalid` or `grant_expired`.
 */
export async function verifyGrant(grants: StorageGrants, request: Request, now = Date.now()): Promise<string> {
  const url = new URL(request.url);
  const q = url.searchParams;
  const presented = q.get("X-Amz-Signature") ?? "";
  const date = q.get("X-Amz-Date") ?? "";
  const expires = Number(q.get("X-Amz-Expires"));
  const signedHeaders = (q.get("X-Amz-SignedHeaders") ?? "").split(";").filter((h) => h !== "host");
  const start = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!/^[0-9a-f]{64}$/.test(presented) || !start || !Number.isInteger(expires) || expires <= 0 || expires * 1000 > LIMITS.signedUploadValidityMs) {
    throw new ServiceError("signature_invalid", "this storage URL is not a valid signed URL");
  }
  const headers: Record<string, string> = {};
  for (const name of signedHeaders) headers[name] = request.headers.get(name) ?? "";
  q.delete("X-Amz-Signature");
  const expected = (await signed(grants, request.method, url, headers, date)).searchParams.get("X-Amz-Signature") ?? "";
  if (!digestsEqual(expected, presented)) {
    throw new ServiceError("signature_invalid", "the storage URL's signature does not match this request (URL, method and headers must be used exactly as returned; an upload's content-length is the size declared when it was created)");
  }
  const signedAt = Date.UTC(+start[1]!, +start[2]! - 1, +start[3]!, +start[4]!, +start[5]!, +start[6]!);
  if (now > signedAt + expires * 1000) throw new ServiceError("grant_expired", "this signed storage URL has expired; create the batch again with the same idempotency_key for a new one");
  if (now < signedAt - 5 * 60 * 1000) throw new ServiceError("signature_invalid", "this storage URL is dated in the future");
  const path = url.pathname.slice(new URL(grants.endpoint).pathname.length + 1);
  try {
    return decodeURIComponent(path);
  } catch {
    throw new ServiceError("signature_invalid", "this storage URL's path is not a valid object name");
  }
}

/**
 * The object a read grant names, checked to be exactly the `bytes` and `sha256` recorded for it
 * (the sidecar reading an uploaded image, an image runtime reading a canonical one). Throws on any
 * difference, a plaintext remote URL or a redirect.
 */
export async function readGranted(grant: { url: string; headers: ReadonlyMap<string, string> }, expected: { bytes: number; sha256: string }, what: string): Promise<Uint8Array<ArrayBuffer>> {
  const res = await fetch(checkServiceUrl(grant.url, "storage"), {
    headers: Object.fromEntries(grant.headers),
    redirect: "error",
    signal: AbortSignal.timeout(LIMITS.imageReadGrantMs),
  });
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new Error(`reading ${what} failed: HTTP ${res.status}`);
  }
  const bytes = new Uint8Array(expected.bytes);
  let at = 0;
  for await (const chunk of res.body) {
    if (at + chunk.byteLength > bytes.byteLength) throw new Error(`${what} is longer than recorded`);
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  if (at !== bytes.byteLength) throw new Error(`${what} is shorter than recorded`);
  if ((await sha256Hex(bytes)) !== expected.sha256) throw new Error(`${what}'s SHA-256 is not the recorded one`);
  return bytes;
}
