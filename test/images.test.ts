/**
 * Image assets end to end, on a stack of its own (its sidecar is killed and restarted, and edges
 * with other settings are added beside the first): create, the signed PUT and what it is bound to,
 * completion by the sidecar (sharp), each refusal, EXIF rotation pixel by pixel, metadata removal,
 * cross-account 404s, the flags, a sidecar killed while it preprocesses, and retention cleanup.
 * Every image is written by a library at test time (test/support/images.ts).
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import pg from "pg";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateImageAssetRequest, ImageAsset, imageObjects, type ImageRefusal } from "../contract/images.ts";
import { LIMITS } from "../contract/limits.ts";
import { OPENAPI_PATH } from "../contract/openapi.ts";
import { EDGE_INTERNAL_PATHS, Grant } from "../server-shared/sidecar-protocol.ts";
import { startStack, type Stack } from "../local/stack.ts";
import { animatedPng, flat, photo, pixelAt, pngChunks, pngWithComment, QUADRANT_COLOURS, quadrants, sha256 } from "./support/images.ts";
import { callJson, errorOf, owner, type Owner, type Reply } from "./support/own-stack.ts";

const dataDir = mkdtempSync(join(tmpdir(), "svc-images-"));
chmodSync(dataDir, 0o711);
let stack: Stack;

let alice: Owner;
let bob: Owner;

beforeAll(async () => {
  stack = await startStack({
    dataDir,
    log: () => {},
    edgeVars: { IMAGE_API: "on", IMAGE_BROWSER: "on" },
    sidecarEnv: { SVC_TEST_CLEANUP_EVERY_MS: "500" },
  });
  [alice, bob] = await Promise.all([owner(stack, "alice-images"), owner(stack, "bob-images")]);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  if (!process.env.KEEP_IMAGES_STACK) rmSync(dataDir, { recursive: true, force: true });
});

const call = (path: string, token: string, body?: unknown, base = stack.baseUrl) => callJson(base, path, token, body);

async function create(bytes: Uint8Array, filename: string, token = alice.key, base = stack.baseUrl, purpose = "prediction"): Promise<ImageAsset> {
  const reply = await call("/v1/image-assets", token, { purpose, filename, source_bytes: bytes.byteLength, sha256: sha256(bytes) }, base);
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  return ImageAsset.parse(reply.body);
}

async function put(asset: ImageAsset, bytes: Uint8Array, headers = asset.upload!.headers): Promise<Response> {
  return fetch(asset.upload!.url, { method: "PUT", headers, body: bytes });
}

/** Create, PUT with the returned headers, complete: what an SDK's one-call upload does. */
async function upload(bytes: Uint8Array, filename: string, token = alice.key, base = stack.baseUrl, purpose = "prediction"): Promise<{ asset: ImageAsset; completed: Reply }> {
  const asset = await create(bytes, filename, token, base, purpose);
  const res = await put(asset, bytes);
  expect(res.status, await res.clone().text()).toBe(200);
  return { asset, completed: await call(`/v1/image-assets/${asset.id}/complete`, token, {}, base) };
}

/** A stored object's bytes (null when there is none), read through a grant as the sidecar reads it. */
async function storedObject(object: string): Promise<Uint8Array | null> {
  const res = await fetch(`${stack.baseUrl}${EDGE_INTERNAL_PATHS.grants}`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.secrets.sidecar}`, "content-type": "application/json" },
    body: JSON.stringify({ object, method: "GET" }),
  });
  const grant = Grant.parse(await res.json());
  const read = await fetch(grant.url);
  if (read.status === 404) return null;
  expect(read.status).toBe(200);
  return new Uint8Array(await read.arrayBuffer());
}

async function sql<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
  const db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  try {
    return (await db.query<T>(text, params)).rows;
  } finally {
    await db.end();
  }
}

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("an image asset's life", () => {
  it("uploads a JPEG through the signed PUT and completes it into a canonical RGB PNG stored beside the original", async () => {
    const bytes = await photo(640, 480);
    const asset = await create(bytes, "Holiday photo.JPG");
    expect(asset).toMatchObject({ status: "uploading", purpose: "prediction", filename: "Holiday photo.JPG", source_bytes: bytes.byteLength, sha256: sha256(bytes), canonical: null });
    expect(asset.upload!.headers).toEqual({
      "content-length": String(bytes.byteLength),
      "if-none-match": "*",
      "x-amz-checksum-sha256": Buffer.from(sha256(bytes), "hex").toString("base64"),
    });
    expect(Date.parse(asset.upload!.expires_at) - Date.now()).toBeLessThanOrEqual(LIMITS.imageUploadValidityMs);
    expect(Date.parse(asset.expires_at!) - Date.parse(asset.created_at)).toBeGreaterThan(LIMITS.imagePredictionRetentionMs - 60_000);
    expect((await put(asset, bytes)).status).toBe(200);

    const completed = await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {});
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    const ready = ImageAsset.parse(completed.body);
    expect(ready).toMatchObject({ status: "ready", source: { format: "jpeg", width: 640, height: 480 }, error: null });
    expect(ready.upload).toBeUndefined();
    expect(ready.canonical).toMatchObject({ width: 640, height: 480 });

    // Completing again, and reading it, give the same finalized asset.
    expect((await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {})).body).toEqual(completed.body);
    expect((await call(`/v1/image-assets/${asset.id}`, alice.key)).body).toEqual(completed.body);

    const original = await storedObject(imageObjects.source(asset.id));
    expect(original && sha256(original)).toBe(sha256(bytes));
    const [attempt] = await sql<{ canonical_attempt: number }>("SELECT canonical_attempt FROM image_assets WHERE id = $1", [asset.id]);
    const canonical = (await storedObject(imageObjects.canonical(asset.id, attempt!.canonical_attempt)))!;
    expect(sha256(canonical)).toBe(ready.canonical!.sha256);
    expect(canonical.byteLength).toBe(ready.canonical!.bytes);
    const meta = await sharp(canonical).metadata();
    expect(meta).toMatchObject({ format: "png", width: 640, height: 480, channels: 3, depth: "uchar", hasAlpha: false });
    // Decoded, it is the photo (JPEG's own loss aside).
    for (const [x, y] of [[0, 0], [320, 240], [639, 479]] as const) {
      const expected = await pixelAt(bytes, x, y);
      (await pixelAt(canonical, x, y)).forEach((v, i) => expect(Math.abs(v - expected[i]!)).toBeLessThanOrEqual(2));
    }
  });

  it("takes a signed-in user's session as well as the API key, for the same account", async () => {
    const { asset, completed } = await upload(await photo(48, 32, "png"), "from-the-browser.png", alice.userToken);
    expect(completed.status).toBe(200);
    expect((await call(`/v1/image-assets/${asset.id}`, alice.key)).status).toBe(200);
  });

  it("scales a large photo down to at most the canonical pixel bound, never up", async () => {
    const { completed } = await upload(await flat(4000, 4000, "png"), "exactly-16-megapixels.png");
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    const canonical = ImageAsset.parse(completed.body).canonical!;
    expect(canonical.width * canonical.height).toBeLessThanOrEqual(LIMITS.imageCanonicalPixels);
    expect(canonical.width).toBe(canonical.height);
    expect(canonical.bytes).toBeLessThanOrEqual(LIMITS.imageCanonicalBytes);
  });
});

describe("refusals on completion, before any GPU work", () => {
  const refusals: [string, () => Promise<{ bytes: Uint8Array; filename: string }>, ImageRefusal][] = [
    ["a truncated JPEG", async () => ({ bytes: (await photo(320, 240)).subarray(0, 6000), filename: "cut.jpg" }), "image_truncated"],
    ["a truncated PNG", async () => { const png = await photo(320, 240, "png"); return { bytes: png.subarray(0, png.byteLength - 100), filename: "cut.png" }; }, "image_truncated"],
    ["an animated PNG", async () => ({ bytes: await animatedPng(), filename: "moving.png" }), "image_animated"],
    ["3,727 x 4,293 = 16,000,011 pixels (the least over 16 million with both edges allowed)", async () => ({ bytes: await flat(3727, 4293), filename: "big.png" }), "image_too_large"],
    ["an edge of 8,193 pixels", async () => ({ bytes: await flat(8193, 1), filename: "long.png" }), "image_too_large"],
    ["a PNG named .jpg", async () => ({ bytes: await photo(40, 30, "png"), filename: "renamed.jpg" }), "image_type_mismatch"],
    ["a JPEG named .png", async () => ({ bytes: await photo(40, 30), filename: "renamed.png" }), "image_type_mismatch"],
    ["a decompression bomb (8,000 x 8,000 pixels in about 190 KB)", async () => ({ bytes: await flat(8000, 8000), filename: "bomb.png" }), "image_too_large"],
    ["a GIF", async () => ({ bytes: new Uint8Array(await sharp({ create: { width: 4, height: 4, channels: 3, background: "red" } }).gif().toBuffer()), filename: "anim.png" }), "image_unsupported"],
    ["a JPEG whose image data is noise", async () => { const jpeg = await photo(64, 64); const broken = new Uint8Array(jpeg); broken.fill(0x55, 4, broken.length - 2); return { bytes: broken, filename: "noise.jpg" }; }, "image_undecodable"],
  ];

  it.each(refusals)("refuses %s with a 422 that says which, and keeps the refusal", async (_name, make, code) => {
    const { bytes, filename } = await make();
    const { asset, completed } = await upload(bytes, filename);
    expect(completed.status, JSON.stringify(completed.body)).toBe(422);
    expect(errorOf(completed).code).toBe(code);
    const again = await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {});
    expect(again.body).toEqual(completed.body);
    expect(ImageAsset.parse((await call(`/v1/image-assets/${asset.id}`, alice.key)).body)).toMatchObject({ status: "rejected", canonical: null, error: { code } });
  });

  it("accepts an edge of exactly 8,192 pixels", async () => {
    expect((await upload(await flat(8192, 2), "edge.png")).completed.status).toBe(200);
  });

  it("refuses a filename that is no JPEG or PNG name, a size over 10 MiB and a malformed SHA-256 at creation", async () => {
    const base = { purpose: "prediction", filename: "a.jpg", source_bytes: 10, sha256: "a".repeat(64) };
    for (const body of [
      { ...base, filename: "a.gif" },
      { ...base, filename: "../a.jpg" },
      { ...base, filename: "a\u0007.jpg" },
      { ...base, source_bytes: LIMITS.imageSourceBytes + 1 },
      { ...base, source_bytes: 0 },
      { ...base, sha256: "z".repeat(64) },
      { ...base, purpose: "generation" },
      { ...base, url: "https://example.com/cat.jpg" },
    ]) {
      const reply = await call("/v1/image-assets", alice.key, body);
      expect(reply.status, JSON.stringify(body)).toBe(422);
      expect(errorOf(reply).code).toBe("invalid_request");
    }
  });
});

describe("per-account limits", () => {
  /** Assets of `accountId` written straight into the table, created `ago`: what an account's past use left. */
  const seed = (accountId: string, count: number, ago: string, lease = false) =>
    sql(
      `INSERT INTO image_assets (id, account_id, purpose, filename, source_bytes, sha256, created_at, expires_at, upload_expires_at, lease_token, lease_expires_at)
       SELECT gen_random_uuid(), $1, 'prediction', 'seed.png', 10, repeat('ab', 32), now() - $3::interval, now() + interval '1 day', now() + interval '1 day',
              CASE WHEN $4 THEN gen_random_uuid() END, CASE WHEN $4 THEN now() + interval '1 minute' END
         FROM generate_series(1, $2::int)`,
      [accountId, count, ago, lease],
    );
  const accountOf = async (login: string) => (await sql<{ id: string }>("SELECT id FROM accounts WHERE idp_subject = $1", [login]))[0]!.id;
  const body = { purpose: "prediction", filename: "limit.png", source_bytes: 10, sha256: "cd".repeat(32) };

  it("refuse a create past the assets created in a minute and past the assets kept, each at its boundary, one place to one of two credentials at once", async () => {
    const carol = await owner(stack, "carol-images-limits");
    const id = await accountOf("carol-images-limits");
    await seed(id, LIMITS.imageAssetsPerMinute - 1, "0 seconds");
    // One place left this minute, asked for by the API key and the session at once: one gets it.
    const both = await Promise.all([call("/v1/image-assets", carol.key, body), call("/v1/image-assets", carol.userToken, body)]);
    expect(both.map((reply) => reply.status).sort()).toEqual([201, 429]);
    const refused = both.find((reply) => reply.status === 429)!;
    expect(errorOf(refused)).toMatchObject({ code: "image_asset_limit" });
    expect(errorOf(refused).message).toContain(`created ${LIMITS.imageAssetsPerMinute} image assets in the last minute`);
    expect(refused.headers.get("retry-after-ms")).toBe("1000");
    // A minute later they count as kept only, up to the stored limit.
    await sql("UPDATE image_assets SET created_at = now() - interval '2 minutes' WHERE account_id = $1", [id]);
    const kept = Number((await sql<{ n: string }>("SELECT count(*) AS n FROM image_assets WHERE account_id = $1", [id]))[0]!.n);
    await seed(id, LIMITS.imageAssetsStored - kept - 1, "2 minutes");
    expect((await call("/v1/image-assets", carol.key, body)).status).toBe(201);
    const full = await call("/v1/image-assets", carol.userToken, body);
    expect(errorOf(full)).toMatchObject({ code: "image_asset_limit" });
    expect(errorOf(full).message).toContain(`keeps ${LIMITS.imageAssetsStored} image assets`);
    // An asset deleted (its retention ended) frees its place.
    await sql("DELETE FROM image_assets WHERE id = (SELECT id FROM image_assets WHERE account_id = $1 LIMIT 1)", [id]);
    expect((await call("/v1/image-assets", carol.key, body)).status).toBe(201);
  });

  it("let an account's completions run LIMITS.imageCompletionsAtOnce at a time: one more is asked to retry in a second", async () => {
    const dave = await owner(stack, "dave-images-limits");
    const id = await accountOf("dave-images-limits");
    const bytes = await photo(64, 48);
    const asset = await create(bytes, "waiting.jpg", dave.key);
    expect((await put(asset, bytes)).status).toBe(200);
    await seed(id, LIMITS.imageCompletionsAtOnce, "0 seconds", true);
    const busy = await call(`/v1/image-assets/${asset.id}/complete`, dave.key, {});
    expect([busy.status, errorOf(busy).code, busy.headers.get("retry-after")]).toEqual([429, "image_completion_limit", "1"]);
    // Another account's completion is not held up by this one's.
    expect((await upload(await photo(64, 48, "jpeg", 7), "other.jpg", alice.key)).completed.status).toBe(200);
    await sql("UPDATE image_assets SET lease_expires_at = now() - interval '1 second' WHERE account_id = $1 AND id <> $2", [id, asset.id]);
    const done = await call(`/v1/image-assets/${asset.id}/complete`, dave.key, {});
    expect(done.status, JSON.stringify(done.body)).toBe(200);
  });
});

describe("the signed PUT", () => {
  it("stores nothing when the bytes' SHA-256 is not the declared one", async () => {
    const bytes = await photo(64, 48);
    const asset = await create(bytes, "a.jpg");
    const other = new Uint8Array(bytes);
    other[100] = other[100]! ^ 0xff;
    const res = await put(asset, other);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("checksum_mismatch");
    expect(await storedObject(imageObjects.source(asset.id))).toBeNull();
    const completed = await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {});
    expect(completed.status).toBe(409);
    expect(errorOf(completed).code).toBe("upload_incomplete");
    // The right bytes still go up afterwards.
    expect((await put(asset, bytes)).status).toBe(200);
  });

  it("refuses a body of another length (its length is signed) and a second PUT (it cannot replace the first)", async () => {
    const bytes = await photo(64, 48);
    const asset = await create(bytes, "a.jpg");
    const { "content-length": _length, ...headers } = asset.upload!.headers;
    expect((await put(asset, bytes.subarray(0, bytes.byteLength - 1), headers)).status).toBe(403);
    expect(await storedObject(imageObjects.source(asset.id))).toBeNull();
    expect((await put(asset, bytes)).status).toBe(200);
    const second = await put(asset, bytes);
    expect(second.status).toBe(412);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe("already_uploaded");
  });

  it("is bound to its object and its headers, and expires", async () => {
    const bytes = await photo(64, 48);
    const asset = await create(bytes, "a.jpg");
    const elsewhere = asset.upload!.url.replace(`images/${asset.id}/source`, `images/${crypto.randomUUID()}/source`);
    expect((await fetch(elsewhere, { method: "PUT", headers: asset.upload!.headers, body: bytes })).status).toBe(403);
    const { "if-none-match": _guard, ...unguarded } = asset.upload!.headers;
    expect((await put(asset, bytes, unguarded)).status).toBe(403);

    const quick = await stack.addEdge("miniflare", { IMAGE_API: "on", SVC_TEST_IMAGE_UPLOAD_MS: "1000" });
    const short = await create(bytes, "a.jpg", alice.key, quick.baseUrl);
    expect(Date.parse(short.upload!.expires_at) - Date.now()).toBeLessThanOrEqual(1000);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const late = await put(short, bytes);
    expect(late.status).toBe(403);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe("grant_expired");
    await quick.child.stop();
  });
});

describe("the canonical image", () => {
  it("applies the EXIF orientation: every pixel is where the rotated photo has it", async () => {
    // Orientation 6: shown turned a quarter clockwise. The 64 x 32 source becomes 32 x 64.
    const { completed, asset } = await upload(await quadrants({ orientation: 6 }), "phone.jpg");
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    expect(ImageAsset.parse(completed.body).canonical).toMatchObject({ width: 32, height: 64 });
    const [row] = await sql<{ canonical_attempt: number }>("SELECT canonical_attempt FROM image_assets WHERE id = $1", [asset.id]);
    const canonical = (await storedObject(imageObjects.canonical(asset.id, row!.canonical_attempt)))!;
    const { data, info } = await sharp(canonical).raw().toBuffer({ resolveWithObject: true });
    expect(info).toMatchObject({ width: 32, height: 64, channels: 3 });
    // Turned clockwise: the source's bottom-left is now top-left, its top-left top-right, and so on.
    const expectedAt = (x: number, y: number) =>
      y < 32 ? (x < 16 ? QUADRANT_COLOURS.bottomLeft : QUADRANT_COLOURS.topLeft) : x < 16 ? QUADRANT_COLOURS.bottomRight : QUADRANT_COLOURS.topRight;
    let checked = 0;
    for (let y = 0; y < 64; y++) {
      for (let x = 0; x < 32; x++) {
        // JPEG blurs a few pixels across each colour edge; every other pixel is checked.
        if (Math.abs(x - 16) < 3 || Math.abs(y - 32) < 3) continue;
        const i = (y * 32 + x) * 3;
        expectedAt(x, y).forEach((v, c) => expect(Math.abs(data[i + c]! - v), `pixel ${x},${y}`).toBeLessThanOrEqual(40));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(1500);
  });

  it("keeps no metadata: no GPS, EXIF, XMP or comment in its bytes, and no chunk but IHDR, IDAT and IEND", async () => {
    const secret = `svc-private-${crypto.randomUUID()}`;
    const jpeg = await quadrants({ orientation: 3, secret });
    expect(Buffer.from(jpeg).includes(`${secret}-xmp`)).toBe(true);
    const png = await pngWithComment(`${secret}-png-comment`);
    for (const [bytes, filename] of [[jpeg, "gps.jpg"], [png, "comment.png"]] as const) {
      const { completed, asset } = await upload(bytes, filename);
      expect(completed.status, JSON.stringify(completed.body)).toBe(200);
      const [row] = await sql<{ canonical_attempt: number }>("SELECT canonical_attempt FROM image_assets WHERE id = $1", [asset.id]);
      const canonical = Buffer.from((await storedObject(imageObjects.canonical(asset.id, row!.canonical_attempt)))!);
      for (const needle of [secret, "GPS", "Exif", "xmp", "Comment", "51/1"]) expect(canonical.includes(needle), needle).toBe(false);
      expect(pngChunks(canonical).map((c) => c.type)).toEqual(["IHDR", ...pngChunks(canonical).filter((c) => c.type === "IDAT").map(() => "IDAT"), "IEND"]);
      const meta = await sharp(canonical).metadata();
      expect(meta.exif).toBeUndefined();
      expect(meta.xmp).toBeUndefined();
      expect(meta.orientation).toBeUndefined();
    }
  });
});

describe("who may see an asset", () => {
  it("answers another account's asset, an unknown id and a malformed id with the same 404 on every route", async () => {
    const { asset } = await upload(await photo(32, 32), "mine.jpg");
    const unknown = crypto.randomUUID();
    for (const token of [bob.key, bob.userToken]) {
      for (const [path, body] of [[`/v1/image-assets/${asset.id}`, undefined], [`/v1/image-assets/${asset.id}/complete`, {}]] as const) {
        const theirs = await call(path, token, body);
        const none = await call(path.replace(asset.id, unknown), token, body);
        const malformed = await call(path.replace(asset.id, "not-a-uuid"), token, body);
        expect(theirs.status).toBe(404);
        expect(theirs.body).toEqual(none.body);
        expect(malformed.body).toEqual(none.body);
      }
    }
  });

  it("refuses a missing or invalid credential with 401", async () => {
    const res = await fetch(`${stack.baseUrl}/v1/image-assets`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(401);
    expect((await call("/v1/image-assets", "svc_aaaaaaaaaaaaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", {})).status).toBe(401);
    expect((await call("/v1/image-assets", "a.b.c", {})).status).toBe(401);
  });
});

describe("the image flags", () => {
  it("with both off, every image route answers as if it did not exist, and the document leaves them out", async () => {
    const off = await stack.addEdge("miniflare", { IMAGE_API: "off", IMAGE_BROWSER: "off" });
    try {
      const unknownRoute = await call("/v1/no-such-route", alice.key, undefined, off.baseUrl);
      const routes = [
        ["/v1/image-assets", {}],
        [`/v1/image-assets/${crypto.randomUUID()}`, undefined],
        [`/v1/image-assets/${crypto.randomUUID()}/complete`, {}],
        ["/v1/image-models", undefined],
        ["/v1/image-decisions", {}],
        ["/v1/image-credit", undefined],
      ] as const;
      for (const [path, body] of routes) {
        for (const token of [alice.key, alice.userToken]) {
          const reply = await call(path, token, body, off.baseUrl);
          expect(reply.status, path).toBe(404);
          expect(errorOf(reply).code).toBe(errorOf(unknownRoute).code);
        }
        // Not even a 405 for another method.
        const wrongMethod = await fetch(`${off.baseUrl}${path}`, { method: "DELETE" });
        expect(wrongMethod.status).toBe(404);
        expect(wrongMethod.headers.get("allow")).toBeNull();
      }
      const doc = (await call(OPENAPI_PATH, "", undefined, off.baseUrl)).body as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths).filter((p) => p.startsWith("/v1/image-"))).toEqual([]);
      const onDoc = (await call(OPENAPI_PATH, "")).body as { paths: Record<string, unknown> };
      expect(Object.keys(onDoc.paths).filter((p) => p.startsWith("/v1/image-")).sort()).toEqual([
        "/v1/image-assets",
        "/v1/image-assets/{id}",
        "/v1/image-assets/{id}/complete",
        "/v1/image-credit",
        "/v1/image-decisions",
        "/v1/image-models",
      ]);
      // A decision with images keeps its refusal.
      const decision = await call("/v1/systemone", alice.key, { state: "s", questions: { q: { type: "noul" } }, images: [{ asset_id: "a" }] }, off.baseUrl);
      expect(decision.status).toBe(422);
    } finally {
      await off.child.stop();
    }
  });

  it("each flag admits its own credential only: IMAGE_API the API key, IMAGE_BROWSER the session", async () => {
    const bytes = await photo(16, 16);
    const body = { purpose: "prediction", filename: "a.jpg", source_bytes: bytes.byteLength, sha256: sha256(bytes) };
    const [api, browser] = await Promise.all([
      stack.addEdge("miniflare", { IMAGE_API: "on", IMAGE_BROWSER: "off" }),
      stack.addEdge("miniflare", { IMAGE_API: "off", IMAGE_BROWSER: "on" }),
    ]);
    try {
      expect((await call("/v1/image-assets", alice.key, body, api.baseUrl)).status).toBe(201);
      const sessionOnApi = await call("/v1/image-assets", alice.userToken, body, api.baseUrl);
      expect([sessionOnApi.status, errorOf(sessionOnApi).code]).toEqual([401, "wrong_credential_kind"]);
      expect((await call("/v1/image-assets", alice.userToken, body, browser.baseUrl)).status).toBe(201);
      const keyOnBrowser = await call("/v1/image-assets", alice.key, body, browser.baseUrl);
      expect([keyOnBrowser.status, errorOf(keyOnBrowser).code]).toEqual([401, "wrong_credential_kind"]);
    } finally {
      await Promise.all([api.child.stop(), browser.child.stop()]);
    }
  });
});

describe("crashes", () => {
  it("finalizes once when the sidecar is killed after writing its canonical image and before answering", async () => {
    // The sidecar waits 5 s after writing its result: it is killed in that window.
    await stack.restartSidecar("SIGTERM", { SVC_TEST_IMAGE_HOLD_MS: "5000" });
    try {
      const bytes = await photo(320, 200);
      const asset = await create(bytes, "crash.jpg");
      expect((await put(asset, bytes)).status).toBe(200);
      const first = call(`/v1/image-assets/${asset.id}/complete`, alice.key, {});
      await until(async () => (await storedObject(imageObjects.canonical(asset.id, 1))) !== null);
      await stack.restartSidecar("SIGKILL");
      const failed = await first;
      expect(failed.status).toBe(503);
      expect((await call(`/v1/image-assets/${asset.id}`, alice.key)).body).toMatchObject({ status: "uploading", canonical: null });

      const done = await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {});
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect((await call(`/v1/image-assets/${asset.id}/complete`, alice.key, {})).body).toEqual(done.body);
      const [row] = await sql<{ attempts: number; canonical_attempt: number; status: string }>(
        "SELECT attempts, canonical_attempt, status FROM image_assets WHERE id = $1",
        [asset.id],
      );
      expect(row).toEqual({ attempts: 2, canonical_attempt: 2, status: "ready" });
      // The dead attempt's file is the same image; the asset names the second.
      expect(sha256((await storedObject(imageObjects.canonical(asset.id, 2)))!)).toBe(ImageAsset.parse(done.body).canonical!.sha256);
    } finally {
      await stack.restartSidecar("SIGTERM");
    }
  });

  it("answers a completion that races another with the other's result or a 409 to retry, never two finalizations", async () => {
    const bytes = await photo(200, 150);
    const asset = await create(bytes, "race.jpg");
    expect((await put(asset, bytes)).status).toBe(200);
    const replies = await Promise.all(Array.from({ length: 4 }, () => call(`/v1/image-assets/${asset.id}/complete`, alice.key, {})));
    for (const reply of replies) expect([200, 409], JSON.stringify(reply.body)).toContain(reply.status);
    expect(replies.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    const [row] = await sql<{ attempts: number }>("SELECT attempts FROM image_assets WHERE id = $1", [asset.id]);
    expect(row!.attempts).toBe(1);
  });
});

describe("retention", () => {
  it("expires an asset (the same 404 as another account's) and deletes its files once no grant or lease is outstanding, with admissions disabled", async () => {
    // Retention 4 s, its upload grant 3 s: a grant counts whole seconds, so a 1 s grant could lapse
    // before the PUT right after it on a loaded machine (CI saw 403 grant_expired once).
    const short = await stack.addEdge("miniflare", { IMAGE_API: "on", SVC_TEST_IMAGE_RETENTION_MS: "4000", SVC_TEST_IMAGE_UPLOAD_MS: "3000" });
    try {
      const { asset, completed } = await upload(await photo(64, 64), "short-lived.jpg", alice.key, short.baseUrl);
      expect(completed.status).toBe(200);
      // Another asset of the same account whose upload grant is still outstanding, and one under a lease:
      // made with the default retention, so that cleanup cannot take them before the updates below
      // give them their expiry, however slow the machine.
      const pending = await create(await photo(8, 8), "pending.jpg", alice.key);
      const leased = await create(await photo(8, 8), "leased.jpg", alice.key);
      // Cleanup runs for a disabled account too (its admissions are refused).
      const [account] = await sql<{ account_id: string }>("SELECT account_id FROM image_assets WHERE id = $1", [asset.id]);
      await sql("UPDATE accounts SET status = 'disabled' WHERE id = $1", [account!.account_id]);
      await sql("UPDATE image_assets SET expires_at = now() - interval '1 second', upload_expires_at = now() + interval '15 seconds' WHERE id = $1", [pending.id]);
      await sql("UPDATE image_assets SET expires_at = now() - interval '1 second', upload_expires_at = now() - interval '1 second', lease_expires_at = now() + interval '15 seconds' WHERE id = $1", [leased.id]);
      try {
        await until(async () => (await sql("SELECT 1 FROM image_assets WHERE id = $1", [asset.id])).length === 0, 30_000);
        // Expired while a grant or a lease was outstanding: kept until it lapses.
        expect((await sql("SELECT id FROM image_assets WHERE id = ANY ($1)", [[pending.id, leased.id]])).length).toBe(2);
        expect(await storedObject(imageObjects.source(asset.id))).toBeNull();
        expect(await storedObject(imageObjects.canonical(asset.id, 1))).toBeNull();
        await until(async () => (await sql("SELECT 1 FROM image_assets WHERE id = ANY ($1)", [[pending.id, leased.id]])).length === 0, 40_000);
      } finally {
        await sql("UPDATE accounts SET status = 'active' WHERE id = $1", [account!.account_id]);
      }
      const gone = await call(`/v1/image-assets/${asset.id}`, alice.key);
      const never = await call(`/v1/image-assets/${crypto.randomUUID()}`, alice.key);
      expect(gone.status).toBe(404);
      expect(gone.body).toEqual(never.body);
    } finally {
      await short.child.stop();
    }
  });

  it("keeps an asset a training job has taken while the job runs, and 30 days after it ends, however old the asset is", async () => {
    const { asset } = await upload(await photo(16, 16), "labelled.jpg", alice.key, stack.baseUrl, "training");
    expect(asset.purpose).toBe("training");
    const [row] = await sql<{ account_id: string }>("SELECT account_id FROM image_assets WHERE id = $1", [asset.id]);
    // A training job of the account (image training is part 2: a job row is what takes the asset).
    const [job] = await sql<{ id: string }>(
      `INSERT INTO trainings (account_id, idempotency_key, status, base_model, object_key, expires_at)
       VALUES ($1, $2, 'running', 'svc-shared', 'trainings/none/examples.jsonl', now() + interval '1 day') RETURNING id`,
      [row!.account_id, `images-${asset.id}`],
    );
    // Old, and its upload grant long lapsed (cleanup waits for that too: a deleted object could be PUT again).
    await sql("UPDATE image_assets SET training_id = $2, expires_at = now() - interval '1 day', upload_expires_at = now() - interval '1 day' WHERE id = $1", [asset.id, job!.id]);
    const held = await call(`/v1/image-assets/${asset.id}`, alice.key);
    expect(held.status).toBe(200);
    expect(held.body.expires_at).toBeNull();

    // Ended 29 days ago: one more day.
    await sql("UPDATE trainings SET status = 'failed', finished_at = now() - interval '29 days' WHERE id = $1", [job!.id]);
    const ending = ImageAsset.parse((await call(`/v1/image-assets/${asset.id}`, alice.key)).body);
    expect(Date.parse(ending.expires_at!) - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(Date.parse(ending.expires_at!) - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    // Several cleanup runs pass; it stays.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    expect((await sql("SELECT 1 FROM image_assets WHERE id = $1", [asset.id])).length).toBe(1);

    // Ended 30 days ago: gone (the same 404), then deleted.
    await sql("UPDATE trainings SET finished_at = now() - interval '30 days 1 second' WHERE id = $1", [job!.id]);
    expect((await call(`/v1/image-assets/${asset.id}`, alice.key)).status).toBe(404);
    await until(async () => (await sql("SELECT 1 FROM image_assets WHERE id = $1", [asset.id])).length === 0, 30_000);
    expect(await storedObject(imageObjects.source(asset.id))).toBeNull();
  });

  it("answers 404 for an expired asset before cleanup has deleted it", async () => {
    const { asset } = await upload(await photo(16, 16), "soon.jpg");
    await sql("UPDATE image_assets SET expires_at = now() - interval '1 second', lease_expires_at = now() + interval '1 minute' WHERE id = $1", [asset.id]);
    for (const [path, body] of [[`/v1/image-assets/${asset.id}`, undefined], [`/v1/image-assets/${asset.id}/complete`, {}]] as const) {
      expect((await call(path, alice.key, body)).status).toBe(404);
    }
    await sql("UPDATE image_assets SET lease_expires_at = NULL WHERE id = $1", [asset.id]);
  });
});

describe("what never leaves", () => {
  it("no read grant, sidecar or runtime address in any answer, and neither the filename nor a signed URL in any log", async () => {
    const filename = `private-${crypto.randomUUID()}.jpg`;
    const { asset, completed } = await upload(await photo(64, 48), filename);
    const read = await call(`/v1/image-assets/${asset.id}`, alice.key);
    const refused = await upload((await photo(64, 48)).subarray(0, 900), `cut-${filename}`);
    for (const reply of [completed, read, refused.completed]) {
      const text = JSON.stringify(reply.body) + JSON.stringify([...reply.headers]);
      for (const needle of ["X-Amz", "x-amz", "/storage/", stack.urls.sidecar, stack.urls.runtime, "127.0.0.1"]) expect(text, needle).not.toContain(needle);
    }
    const logs = readdirSync(join(dataDir, "logs")).map((name) => readFileSync(join(dataDir, "logs", name), "utf8")).join("\n");
    expect(logs).not.toContain(filename);
    expect(logs).not.toContain("X-Amz-Signature");
    expect(logs).not.toContain(asset.sha256);
  });
});

describe("generated bodies", () => {
  it("answers any JSON body of create with 201 exactly when the contract accepts it, and never a 5xx", async () => {
    const field = fc.oneof(
      fc.constantFrom("purpose", "filename", "source_bytes", "sha256", "__proto__", "constructor", "url", "image"),
      fc.string({ maxLength: 12 }),
    );
    const value = fc.oneof(
      fc.constantFrom("prediction", "training", "a.jpg", "b.PNG", "c.gif", "a".repeat(64), "0".repeat(64), 1, 0, -1, 1.5, LIMITS.imageSourceBytes, LIMITS.imageSourceBytes + 1, 1e308),
      fc.jsonValue({ maxDepth: 2 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.dictionary(field, value, { maxKeys: 6 }), fc.boolean(), async (fields, useSession) => {
        const reply = await call("/v1/image-assets", useSession ? alice.userToken : alice.key, fields);
        expect(reply.status).toBeLessThan(500);
        const valid = CreateImageAssetRequest.safeParse(JSON.parse(JSON.stringify(fields))).success;
        expect(reply.status, JSON.stringify({ fields, body: reply.body })).toBe(valid ? 201 : 422);
      }),
      { numRuns: 60 },
    );
  });
});
