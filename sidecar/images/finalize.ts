/**
 * One completion's work on the GPU host (runs in the sidecar, called by the edge under the asset's
 * finalization lease): read the original through its grant, check that it is the file declared (its
 * length and SHA-256), check and convert it (preprocess.ts), and write the canonical PNG through the
 * second grant (if-none-match: each attempt has its own object). The edge commits the answer.
 *
 * One image at a time per sidecar: decoding a 16-megapixel photo holds about 50 MB of pixels, and
 * images wait for each other rather than add up (bench:images measures the peak).
 *
 *     const answer = await finalizeImage(request, { holdMs: 0 });  // PreprocessImageResponse
 */
import { LIMITS } from "../../contract/limits.ts";
import { checkServiceUrl } from "../../contract/urls.ts";
import { readGranted } from "../../server-shared/grants.ts";
import type { PreprocessImageRequest, PreprocessImageResponse } from "../../server-shared/sidecar-protocol.ts";
import { preprocessImage } from "./preprocess.ts";

let queue: Promise<unknown> = Promise.resolve();

/** Runs `work` after every image before it. */
function oneAtATime<T>(work: () => Promise<T>): Promise<T> {
  const result = queue.then(work, work);
  queue = result.catch(() => undefined);
  return result;
}

export interface FinalizeOptions {
  /** How long to wait after the canonical PNG is written, before answering (0 but in a test that needs the window). */
  holdMs: number;
}

export function finalizeImage(request: PreprocessImageRequest, options: FinalizeOptions): Promise<PreprocessImageResponse> {
  return oneAtATime(async () => {
    const bytes = await readSource(request);
    const result = await preprocessImage(bytes, request.declared);
    if (!result.ok) return { ok: false, code: result.code, message: result.message };
    const res = await fetch(checkServiceUrl(request.canonical.url, "storage"), {
      method: "PUT",
      headers: { ...Object.fromEntries(request.canonical.headers), "content-type": "image/png", "content-length": String(result.png.byteLength) },
      body: result.png,
      redirect: "error",
      signal: AbortSignal.timeout(LIMITS.imageReadGrantMs),
    });
    await res.body?.cancel();
    if (!res.ok) throw new Error(`writing the canonical image failed: HTTP ${res.status}`);
    if (options.holdMs > 0) await new Promise((resolve) => setTimeout(resolve, options.holdMs));
    return { ok: true, source: result.source, canonical: result.canonical };
  });
}

/** The original's bytes, checked against the length and SHA-256 the asset was created with. */
function readSource(request: PreprocessImageRequest): Promise<Uint8Array<ArrayBuffer>> {
  return readGranted(request.source, { bytes: request.source_bytes, sha256: request.sha256 }, "the uploaded image");
}
