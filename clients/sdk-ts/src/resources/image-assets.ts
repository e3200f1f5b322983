/**
 * `client.imageAssets`: still photos (JPEG or PNG, at most 10 MiB) uploaded once, checked and made
 * canonical by the service, then named by their id in image decisions. `upload` does it in one call:
 *
 *     const asset = await client.imageAssets.upload("cat.jpg");
 *     asset.status;                                     // "ready"
 *     asset.canonical;                                  // { width, height, bytes, sha256 }
 *
 * It creates the asset (declaring the file's size and SHA-256), PUTs the file to the signed storage
 * address the create answer names with exactly its headers (no credential of the client goes there),
 * and completes it; a refused image throws ImageRefusedError naming why (`err.code`).
 *
 * These routes take either credential, as the deployment allows (IMAGE_API=on for API keys,
 * IMAGE_BROWSER=on for access tokens): the client's API key when it has one, else its access token.
 */
import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { CreateImageAssetRequest, type ImageAsset, type ImagePurpose } from "../../../../contract/images.ts";
import { LIMITS } from "../../../../contract/limits.ts";
import { withRequestId, type Credential, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";
import { APIError, InputError } from "../errors.ts";
import type { UploadResult } from "./jobs.ts";

/** A photo to upload: the path of a file, its bytes, or a Blob (a File brings its name). */
export type ImageFile = string | Uint8Array | Blob;

export interface UploadImageParams {
  /**
   * The name shown for the asset, ending in .jpg, .jpeg or .png as the file is (display only: no
   * model sees it). A path's or a File's own name when absent; required for bytes and a plain Blob.
   */
  filename?: string;
  /** What the photo is for (default "prediction"). */
  purpose?: ImagePurpose;
}

/** Either credential: the API key when the client has one, else the signed-in user's access token. */
const auth: readonly Credential[] = ["api_key", "access_token"];

/**
 * A completion is safe to repeat (one finalization under a lease), so besides 429 and 529 it is
 * retried after 503 and after 409 `asset_finalizing` (another completion holds the lease), waiting
 * the `retry-after` the service names.
 */
const completionRetried = (err: APIError) => err.status === 503 || (err.status === 409 && err.code === "asset_finalizing");

export class ImageAssets {
  constructor(private readonly transport: Transport) {}

  /**
   * Uploads a photo as an asset in one call: reads it, computes its size and SHA-256, creates the
   * asset, PUTs the file to its signed address with exactly the returned headers, completes it, and
   * returns the ready asset. Input the service cannot accept (over 10 MiB, empty, no filename for
   * bytes, another extension) throws InputError before anything is sent; a refused image throws
   * ImageRefusedError with the refusal's `code`.
   *
   *     const asset = await client.imageAssets.upload("photos/cat.jpg");
   *     const fromBytes = await client.imageAssets.upload(bytes, { filename: "cat.png", purpose: "training" });
   */
  async upload(file: ImageFile, params: UploadImageParams = {}, options?: RequestOptions): Promise<WithRequestId<ImageAsset>> {
    const { bytes, name } = await readImage(file);
    const filename = params.filename ?? name;
    if (filename === undefined) {
      throw new InputError("imageAssets.upload needs { filename } for bytes or a Blob without a name: the name shown for the asset, ending in .jpg, .jpeg or .png");
    }
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const created = await this.create({ purpose: params.purpose ?? "prediction", filename, source_bytes: bytes.byteLength, sha256 }, options);
    if (!created.upload) throw new APIError("the service created the image asset without an upload destination", { requestId: created._request_id });
    await this.transport.request<UploadResult>({ method: "PUT", url: created.upload.url, headers: created.upload.headers, body: bytes }, options);
    return this.complete(created.id, options);
  }

  /**
   * Creates an asset for a file of this size and SHA-256 (hex), with the signed `upload` destination:
   * PUT the file there with exactly `upload.headers`, then `complete(id)`. A request the service
   * would refuse throws InputError, naming the field, before anything is sent.
   *
   *     const asset = await client.imageAssets.create({ purpose: "prediction", filename: "cat.jpg", source_bytes: 48213, sha256 });
   *     asset.upload; // { url, method: "PUT", headers, expires_at }
   */
  async create(params: CreateImageAssetRequest, options?: RequestOptions): Promise<WithRequestId<ImageAsset>> {
    const checked = CreateImageAssetRequest.safeParse(params);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      const field = issue.path.join(".");
      throw new InputError(issue.message.startsWith(field) ? issue.message : `${field}: ${issue.message}`);
    }
    const body = JSON.stringify(checked.data);
    return withRequestId(await this.transport.request<ImageAsset>({ method: "POST", path: "/v1/image-assets", auth, body }, options));
  }

  /**
   * Completes an uploaded asset: the service checks the upload and the image and makes its canonical
   * PNG. Returns the ready asset (again, unchanged, when repeated); a refused image throws
   * ImageRefusedError (every later completion too). Retried after 503 and while another completion
   * runs (409 `asset_finalizing`), waiting what the service asks, at most `maxRetries` times.
   *
   *     const ready = await client.imageAssets.complete(asset.id);
   */
  async complete(id: string, options?: RequestOptions): Promise<WithRequestId<ImageAsset>> {
    const path = `${assetPath(id)}/complete`;
    return withRequestId(await this.transport.request<ImageAsset>({ method: "POST", path, auth, body: "{}", retryAlso: completionRetried }, options));
  }

  /**
   * The asset: its status ("uploading", "ready" or "rejected"), the original's format and size once
   * ready, its canonical image, and why it was refused. Another account's, an unknown and an expired
   * asset are the same NotFoundError.
   *
   *     const { status, canonical, error } = await client.imageAssets.retrieve(id);
   */
  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<ImageAsset>> {
    return withRequestId(await this.transport.request<ImageAsset>({ method: "GET", path: assetPath(id), auth }, options));
  }
}

/** The photo's bytes, and its own name when it has one; sizes are checked before anything large is read. */
async function readImage(file: ImageFile): Promise<{ bytes: Uint8Array; name: string | undefined }> {
  if (typeof file === "string") {
    try {
      const info = await stat(file);
      if (info.isFile()) checkSize(info.size, file);
      return { bytes: checkSize(await readFile(file), file), name: basename(file) };
    } catch (err) {
      if (err instanceof InputError) throw err;
      throw new InputError(`cannot read the image ${file}: ${(err as Error).message}`, { cause: err });
    }
  }
  if (file instanceof Uint8Array) return { bytes: checkSize(file), name: undefined };
  if (typeof Blob !== "undefined" && file instanceof Blob) {
    checkSize(file.size);
    const name = "name" in file && typeof file.name === "string" && file.name !== "" ? file.name : undefined;
    return { bytes: checkSize(new Uint8Array(await file.arrayBuffer())), name };
  }
  throw new InputError("an image is the path of a file, its bytes (a Uint8Array or Buffer), or a Blob");
}

function checkSize<T extends Uint8Array | number>(sized: T, path?: string): T {
  const size = typeof sized === "number" ? sized : sized.byteLength;
  const what = path === undefined ? "the image" : `the image ${path}`;
  if (size === 0) throw new InputError(`${what} is empty`);
  if (size > LIMITS.imageSourceBytes) throw new InputError(`${what} is ${size} bytes; an image asset holds at most ${LIMITS.imageSourceBytes} bytes (10 MiB)`);
  return sized;
}

function assetPath(id: string): string {
  if (typeof id !== "string" || id === "") throw new InputError("an image asset id is a non-empty string");
  return `/v1/image-assets/${encodeURIComponent(id)}`;
}
