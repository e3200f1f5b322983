/**
 * How the bulk worker reaches batch inputs (runs in the sidecar): it asks the edge for a short signed
 * grant for one object (POST /internal/grants with the sidecar secret; the edge holds the signing
 * key) and uses it, never a customer credential. Grants last LIMITS.workerGrantMs.
 *
 *     const bytes = await readInput(edge, "batches/<id>/input.jsonl", signal);  // null: no such object
 *     await deleteObject(edge, "batches/<id>/input.jsonl");
 */
import { LIMITS } from "../../contract/limits.ts";
import { checkServiceUrl } from "../../contract/urls.ts";
import { EDGE_INTERNAL_PATHS, Grant, type GrantRequest } from "../../server-shared/sidecar-protocol.ts";

/** The edge as the worker calls it: its base URL and the shared sidecar secret to send, as it is now. */
export interface EdgeLink {
  url: string;
  secret: () => string;
}

async function grant(edge: EdgeLink, request: GrantRequest, signal?: AbortSignal): Promise<Grant> {
  const res = await fetch(new URL(EDGE_INTERNAL_PATHS.grants, checkServiceUrl(edge.url, "edge")), {
    method: "POST",
    headers: { authorization: `Bearer ${edge.secret()}`, "content-type": "application/json" },
    body: JSON.stringify(request),
    redirect: "error",
    signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(10_000)]) : AbortSignal.timeout(10_000),
  });
  if (!res.ok) throw new Error(`the edge refused a ${request.method} grant: HTTP ${res.status}`);
  return Grant.parse(await res.json());
}

/** A GET grant of one object, for another process to read it with (an image runtime reading a canonical PNG). */
export async function readGrant(edge: EdgeLink, object: string, signal?: AbortSignal): Promise<{ url: string; headers: Record<string, string> }> {
  const { url, headers } = await grant(edge, { object, method: "GET" }, signal);
  return { url, headers };
}

/** The object's bytes, or null when it does not exist; reads at most `maxBytes` (the bulk file limit) plus one byte. */
export async function readInput(edge: EdgeLink, object: string, signal?: AbortSignal, maxBytes: number = LIMITS.bulkFileBytes): Promise<Uint8Array | null> {
  const { url, headers } = await grant(edge, { object, method: "GET" }, signal);
  const res = await fetch(url, { headers, redirect: "error", signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(LIMITS.workerGrantMs)]) : AbortSignal.timeout(LIMITS.workerGrantMs) });
  if (res.status === 404) return null;
  if (!res.ok || !res.body) throw new Error(`reading ${object.split("/")[0] === "trainings" ? "a training file" : "a batch input"} failed: HTTP ${res.status}`);
  // At most one byte past the limit is kept: enough to know the file is too large.
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (size > maxBytes) break;
  }
  const bytes = new Uint8Array(Math.min(size, maxBytes + 1));
  let at = 0;
  for (const chunk of chunks) {
    const part = chunk.subarray(0, bytes.byteLength - at);
    bytes.set(part, at);
    at += part.byteLength;
    if (at === bytes.byteLength) break;
  }
  return bytes;
}

/** Deletes the object (a missing one counts as deleted). */
export async function deleteObject(edge: EdgeLink, object: string, signal?: AbortSignal): Promise<void> {
  const { url, headers } = await grant(edge, { object, method: "DELETE" }, signal);
  const res = await fetch(url, { method: "DELETE", headers, redirect: "error", signal: signal ?? AbortSignal.timeout(LIMITS.workerGrantMs) });
  if (!res.ok && res.status !== 404) throw new Error(`deleting a stored object failed: HTTP ${res.status}`);
}
