/**
 * Image assets (runs in workerd), behind the image flags (edge/auth/image.ts); the wire shapes are
 * contract/images.ts.
 *
 *   POST /v1/image-assets {purpose, filename, source_bytes, sha256} -> 201 ImageAsset + upload
 *   GET  /v1/image-assets/{id}                                      -> ImageAsset
 *   POST /v1/image-assets/{id}/complete {}                          -> ImageAsset (ready)
 *
 * Completion checks the stored upload (size and SHA-256, as R2 recorded them), takes the asset's
 * finalization lease, and has the sidecar of the shared model's release check the image and write
 * its canonical PNG (this attempt's own object) through two grants bounded by the lease; then it
 * commits the sidecar's answer under the lease, once. A sidecar that fails gives the lease back
 * (503, retry); one that dies leaves it to expire (LIMITS.imageFinalizeLeaseMs). A refused image is
 * kept as `rejected`, and every later completion answers its 422 again.
 *
 * An asset of another account, an unknown id and an expired asset are the same 404. The filename is
 * stored and shown, never logged and never sent anywhere.
 */
import { Hono, type Context } from "hono";
import { CreateImageAssetRequest, formatOfFilename, imageObjects, imageUploadHeaders, type ImageAsset } from "../../contract/images.ts";
import { LIMITS, SHARED_ALIAS } from "../../contract/limits.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import { readJson } from "../../server-shared/body.ts";
import { httpDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { signGrant } from "../../server-shared/grants.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { assetOf, ImageAssetStore, readGrantMs, type AssetLease, type AssetRow } from "../../server-shared/images.ts";
import { PreprocessImageResponse, SIDECAR_PATHS, type PreprocessImageCall } from "../../server-shared/sidecar-protocol.ts";
import { imageAuth } from "../auth/image.ts";
import type { AppEnv } from "../env.ts";
import { pathParam } from "../params.ts";
import { services, sidecarFetch } from "../services.ts";
import { storageGrants } from "../storage.ts";

export const imageAssets = new Hono<AppEnv>();
imageAssets.use("/v1/image-assets", imageAuth);
imageAssets.use("/v1/image-assets/*", imageAuth);

const storeOf = (c: Context<AppEnv>) => new ImageAssetStore(httpDb(services(c.env).sql));

/** Retention and upload validity: the limits, or a test's shorter settings. */
function periods(c: Context<AppEnv>): { retentionMs: number; uploadMs: number } {
  const settings = services(c.env).settings;
  const retentionMs = settings.SVC_TEST_IMAGE_RETENTION_MS ?? LIMITS.imagePredictionRetentionMs;
  return { retentionMs, uploadMs: Math.min(settings.SVC_TEST_IMAGE_UPLOAD_MS ?? LIMITS.imageUploadValidityMs, retentionMs) };
}

imageAssets.post("/v1/image-assets", async (c) => {
  const request = await readJson(c, CreateImageAssetRequest, { maxBytes: LIMITS.controlBodyBytes });
  const { retentionMs, uploadMs } = periods(c);
  const now = Date.now();
  const created = await storeOf(c).create({
    id: crypto.randomUUID(),
    accountId: c.get("accountId"),
    purpose: request.purpose,
    filename: request.filename,
    sourceBytes: request.source_bytes,
    sha256: request.sha256,
    expiresAt: new Date(now + retentionMs),
    // A second past the grant's own expiry, which counts whole seconds.
    uploadExpiresAt: new Date(now + uploadMs + 1000),
  });
  if ("refused" in created) {
    const message =
      created.refused === "stored"
        ? `this account keeps ${created.count} image assets, the most it may (${LIMITS.imageAssetsStored}); an asset's files are deleted when it expires`
        : `this account created ${created.count} image assets in the last minute, the most it may (${LIMITS.imageAssetsPerMinute})`;
    return tooManyRequests(c, "image_asset_limit", message, created.refused === "stored" ? LIMITS.jobLimitRetryMs : 1000);
  }
  const row = created.row;
  const headers = imageUploadHeaders(request.source_bytes, request.sha256);
  const body: ImageAsset = {
    ...assetOf(row),
    upload: {
      url: await signGrant(storageGrants(c, "clients"), imageObjects.source(row.id), "PUT", uploadMs, headers, now),
      method: "PUT",
      headers,
      expires_at: new Date(now + Math.floor(uploadMs / 1000) * 1000).toISOString(),
    },
  };
  return c.json(body, 201);
});

imageAssets.get("/v1/image-assets/:id", async (c) => c.json(assetOf(await findAsset(c))));

imageAssets.post("/v1/image-assets/:id/complete", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const asset = await findAsset(c);
  if (asset.status !== "uploading") return settled(c, asset);

  const stored = await c.env.BUCKET.head(imageObjects.source(asset.id));
  if (!stored) throw new ServiceError("upload_incomplete", "the photo has not been uploaded yet: PUT it to the asset's upload URL with its headers first");
  // The SHA-256 storage recorded from the signed checksum header; should a store not record it, the
  // sidecar's own hash of what it reads still checks it (sidecar/images/finalize.ts).
  const storedSha = stored.checksums.sha256 ? hex(stored.checksums.sha256) : asset.sha256;
  if (stored.size !== asset.source_bytes || storedSha !== asset.sha256) {
    throw new ServiceError("upload_mismatch", "the uploaded file's size or SHA-256 is not the one declared when the asset was created; create a new asset");
  }

  const store = storeOf(c);
  const lease = await store.lease(asset.id, c.get("accountId"), LIMITS.imageFinalizeLeaseMs);
  if (lease === "busy") {
    return tooManyRequests(c, "image_completion_limit", `this account's other ${LIMITS.imageCompletionsAtOnce} completions are being processed; retry in a second`, 1000);
  }
  if (!lease) {
    // Another completion went first: answer with what it left, or ask to come back.
    const now = await findAsset(c);
    if (now.status !== "uploading") return settled(c, now);
    // A completion takes a second or two; the lease (a minute) only bounds one whose edge died.
    c.header("retry-after", "1");
    throw new ServiceError("asset_finalizing", "this asset is being completed by another request; retry in a second");
  }

  let answer: PreprocessImageResponse;
  try {
    answer = await preprocess(c, asset, lease);
  } catch (err) {
    await store.releaseLease(asset.id, lease).catch(() => undefined);
    throw err;
  }
  const finalized = await store.finalize(asset.id, lease, answer);
  if (!finalized) {
    // The lease ran out before the answer came, and another completion may hold it now.
    c.header("retry-after", "1");
    throw new ServiceError("unavailable", "completing this asset took too long; retry");
  }
  return settled(c, finalized);
});

/** A finalized asset's answer: the asset when ready, its refusal (422) when rejected. */
function settled(c: Context<AppEnv>, asset: AssetRow) {
  if (asset.status === "ready") return c.json(assetOf(asset));
  const error = assetOf(asset).error!;
  throw new ServiceError(error.code, error.message);
}

/** The sidecar's check of the upload, under the lease: grants that end with it (and with the asset). */
async function preprocess(c: Context<AppEnv>, asset: AssetRow, lease: AssetLease): Promise<PreprocessImageResponse> {
  const settings = services(c.env).settings;
  const sidecarUrl = await preprocessingSidecar(c);
  const now = Date.now();
  // Held by a running job (expires_at null), an asset lives as long as the job needs it.
  const validityMs = readGrantMs(now, asset.expires_at === null ? Infinity : Date.parse(asset.expires_at), lease.expiresAt);
  if (validityMs < 1000) throw new ServiceError("unavailable", "this asset cannot be completed right now; retry");
  const grants = storageGrants(c, "hosts");
  const canonicalHeaders = { "if-none-match": "*" };
  const request: PreprocessImageCall = {
    declared: formatOfFilename(asset.filename)!,
    source_bytes: asset.source_bytes,
    sha256: asset.sha256,
    source: { url: await signGrant(grants, imageObjects.source(asset.id), "GET", validityMs, {}, now), headers: {} },
    canonical: { url: await signGrant(grants, imageObjects.canonical(asset.id, lease.attempt), "PUT", validityMs, canonicalHeaders, now), headers: canonicalHeaders },
  };
  let res: Response;
  try {
    res = await sidecarFetch(settings, sidecarUrl, SIDECAR_PATHS.preprocessImage, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
      signal: AbortSignal.timeout(validityMs),
    });
  } catch (err) {
    console.error(`image preprocessing: the sidecar could not be reached: ${err instanceof Error ? err.name : "error"}`);
    throw new ServiceError("unavailable", "image processing is unavailable right now; retry shortly");
  }
  if (!res.ok) {
    await res.body?.cancel();
    console.error(`image preprocessing: the sidecar answered HTTP ${res.status}`);
    throw new ServiceError("unavailable", "image processing is unavailable right now; retry shortly");
  }
  return PreprocessImageResponse.parse(await res.json());
}

/** The sidecar that preprocesses images: the one serving the shared model's release. */
async function preprocessingSidecar(c: Context<AppEnv>): Promise<string> {
  const rows = await services(c.env).sql.query(
    `SELECT sidecar_url FROM model_registry WHERE $1 = ANY (aliases) AND retired_at IS NULL AND sidecar_url IS NOT NULL LIMIT 1`,
    [SHARED_ALIAS],
  );
  const url = rows[0]?.sidecar_url;
  if (typeof url !== "string") throw new ServiceError("unavailable", "image processing is unavailable right now; retry shortly", "no sidecar serves the shared alias");
  return url;
}

/** The account's asset named by the path, or the same 404 for an unknown, another account's or an expired one. */
async function findAsset(c: Context<AppEnv>): Promise<AssetRow> {
  const id = pathParam(c, PARAMETERS.imageAssetId);
  const asset = id === null ? null : await storeOf(c).find(id, c.get("accountId"));
  if (!asset) throw new ServiceError("not_found", "no image asset with this id in this account");
  return asset;
}

const hex = (buffer: ArrayBuffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
