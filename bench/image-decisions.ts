/**
 * `npm run bench:image-decisions` (issue 28): the demonstration image model (local/demo-images.ts)
 * trained through the public routes on a stack of its own, then measured on drawings it never saw:
 *
 *   - quality: held-out top-1 accuracy over the answers and "other", ECE (10 bins) of the native
 *     distribution's top probability, and the unknown detection (AUROC of `unknown_probability`,
 *     drawings of none of the answers against the rest). The evaluation drawings come from seeds the
 *     training never used (EVAL_FROM on), 40 of each answer and 40 of the other kinds; nothing is
 *     tuned on them (the model's own acceptance uses its held-out part of the training file).
 *   - speed: each decision's wall time through the edge (key, asset, credit reserve and settle,
 *     sidecar, image runtime), interleaved with the baseline, the image runtime's own read of the
 *     same canonical PNG called directly (what the GPU host cannot avoid); p50, p95 and their ratio.
 *   - memory: the peak resident set (VmHWM) of the image runtime and of the sidecar over the run.
 *
 * Then the same on labelled public data: scikit-learn's handwritten digits (`sklearn/datasets/data/
 * digits.csv.gz` in the PyPI wheel scikit-learn 1.5.2, 1,797 8 x 8 scans, drawn 64 x 64), the
 * question "which digit: zero, one, two or three", digits 4-9 as the images of none of them. Rows
 * whose index is a multiple of 5 are the evaluation part, never trained on; the model trains on up to
 * DIGITS_PER_CLASS of each answer and as many others from the rest.
 *
 *     npm run bench:image-decisions            # about two minutes on 2 CPU cores
 *     PER_KIND=80 npm run bench:image-decisions
 *
 * Figures of the run on 2026-11-25 (2-core CPU, no GPU; EfficientNet-Lite0 256 x 256 on
 * onnxruntime-node 1.30.0):
 *
 *     drawings (120 never seen)   top-1 1.000 (chance 0.333), ECE 0.000, unknown AUROC 1.000
 *     digits (360 rows never      top-1 0.678 (chance 0.200), ECE 0.065, unknown AUROC 0.839
 *       trained on; 216 are 4-9)  zero 42/42, one 26/28, two 19/26, three 38/48, 4-9 119/216
 *     latency, p50 / p95 ms       through the edge 27.2 / 43.1; image runtime alone 15.4 / 26.1 (1.77x / 1.65x)
 *     peak resident memory        image runtime 192 MiB, sidecar 204 MiB
 *
 * The drawings are easy: a frozen ImageNet backbone separates circles, squares and the rest
 * perfectly. The digits are the honest figure: 8 x 8 scans drawn large are far from the photos the
 * backbone learnt on, and with 50 examples of "other" spread over six digits, half of the 4-9 rows
 * are taken for one of the answers.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import sharp from "sharp";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { DecisionResponse, type ChoiceAnswer } from "../contract/decision.ts";
import { CreatedKey } from "../contract/keys.ts";
import { DEMO_QUESTION, DEMO_QUESTION_ID, demoImage, demoImages, DEMO_KINDS } from "../local/demo-images.ts";
import { imageTrainingFile, trainImageModel, uploadImage, type LabelledImage } from "../local/image-api.ts";
import { startStack } from "../local/stack.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { grantCredit } from "../ops/accounts.ts";
import { auroc, eceOfBins, reliabilityBins } from "../server-shared/quality.ts";
import { RUNTIME_PATHS, ImageFeaturesResponse } from "../server-shared/runtime-protocol.ts";
import { EDGE_INTERNAL_PATHS, Grant } from "../server-shared/sidecar-protocol.ts";

const PER_KIND = Number(process.env.PER_KIND ?? 40);
const DIGITS_PER_CLASS = Number(process.env.DIGITS_PER_CLASS ?? 50);
const EVAL_FROM = 5001;
const QUESTIONS = { [DEMO_QUESTION_ID]: DEMO_QUESTION };

let benchKey = "";
const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-image-"));
chmodSync(dataDir, 0o711);
const stack = await startStack({ dataDir, log: () => {}, edgeVars: { IMAGE_API: "on", IMAGE_BROWSER: "on" } });
const db = new pg.Client({ connectionString: stack.databaseUrl });
await db.connect();
try {
  const base = stack.baseUrl;
  const userToken = await getUserAccessToken({ issuer: stack.idp.issuer, login: "bench-images" });
  const keyReply = await fetch(`${base}/v1/keys`, { method: "POST", headers: { authorization: `Bearer ${userToken}`, "content-type": "application/json" }, body: '{"name":"bench"}' });
  const key = CreatedKey.parse(await keyReply.json()).secret;
  benchKey = key;

  const started = performance.now();
  const labelled: LabelledImage[] = [];
  for (const image of await demoImages(40)) {
    labelled.push({ customId: `${image.kind}-${image.seed}`, assetId: await uploadImage(base, key, image.png, "training"), label: image.label });
  }
  const training = await trainImageModel(base, userToken, imageTrainingFile(labelled, QUESTIONS));
  if (training.status !== "ready") throw new Error(`the training ended ${training.status}: ${JSON.stringify(training.evaluation ?? training.error)}`);
  const accepted = training.evaluation!.questions[0]!;
  const { rows: account } = await db.query("SELECT id FROM accounts WHERE idp_subject = 'bench-images'");
  await grantCredit(db, account[0].id as string, { amountMicroUsd: 100_000_000, note: "bench" });

  console.log(`image decisions: ${stack.imageRelease!.engine}, backbone ${stack.imageRelease!.release_id}, ${new Date().toISOString()}`);
  console.log(
    `trained ${training.model} on 120 drawings (seeds 1-40) in ${((performance.now() - started) / 1000).toFixed(1)} s, uploads included; ` +
      `its own acceptance on its held-out part: top-1 ${accepted.candidate.toFixed(3)} vs chance ${accepted.zero_shot.toFixed(3)}, ECE ${accepted.ece.toFixed(3)}`,
  );

  // The evaluation drawings: PER_KIND of each answer, PER_KIND of the other kinds in turn.
  const others = DEMO_KINDS.filter((kind) => kind !== "circle" && kind !== "square");
  const evaluation: { kind: (typeof DEMO_KINDS)[number]; truth: 0 | 1 | 2; seed: number }[] = [];
  for (let i = 0; i < PER_KIND; i++) {
    evaluation.push({ kind: "circle", truth: 0, seed: EVAL_FROM + i }, { kind: "square", truth: 1, seed: EVAL_FROM + i }, { kind: others[i % others.length]!, truth: 2, seed: EVAL_FROM + i });
  }

  const gateway: number[] = [];
  const direct: number[] = [];
  const drawings = await evaluate(
    training.model!,
    QUESTIONS,
    evaluation.map((item) => ({ group: item.kind, truth: item.truth, png: () => demoImage(item.kind, item.seed) })),
    { gateway, direct },
  );
  console.log(`\nquality on ${evaluation.length} drawings it never saw (seeds ${EVAL_FROM}-${EVAL_FROM + PER_KIND - 1}; answers circle, square, and other):`);
  console.log(`  ${drawings.summary}`);
  console.log(`  correct by kind: ${drawings.byGroup}`);

  const pct = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
  console.log(`\nlatency per decision, ${gateway.length} decisions, interleaved with the baseline (the image runtime's own read, called directly):`);
  console.log(`                          p50 ms    p95 ms`);
  console.log(`  through the edge      ${pct(gateway, 0.5).toFixed(1).padStart(8)}  ${pct(gateway, 0.95).toFixed(1).padStart(8)}`);
  console.log(`  image runtime only    ${pct(direct, 0.5).toFixed(1).padStart(8)}  ${pct(direct, 0.95).toFixed(1).padStart(8)}`);
  console.log(`  ratio                 ${(pct(gateway, 0.5) / pct(direct, 0.5)).toFixed(2).padStart(8)}  ${(pct(gateway, 0.95) / pct(direct, 0.95)).toFixed(2).padStart(8)}`);

  await digitsPart(key, userToken);

  const peak = (name: string) => {
    const pid = stack.pieces.find((piece) => piece.name.startsWith(name))?.pid;
    const kb = pid ? /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] : undefined;
    return kb ? `${(Number(kb) / 1024).toFixed(0)} MiB` : "?";
  };
  console.log(`\npeak resident memory over the run: image runtime ${peak("image runtime")}, sidecar ${peak("sidecar")}`);
} finally {
  await db.end();
  await stack.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

/** The image runtime's read of an asset's canonical PNG, called directly with a grant the edge signs for the sidecar; its wall ms. */
async function directRead(assetId: string): Promise<number> {
  const { rows } = await db.query("SELECT canonical_attempt, canonical_bytes, canonical_sha256 FROM image_assets WHERE id = $1", [assetId]);
  const row = rows[0] as { canonical_attempt: number; canonical_bytes: string; canonical_sha256: string };
  const grantRes = await fetch(`${stack.baseUrl}${EDGE_INTERNAL_PATHS.grants}`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.secrets.sidecar}`, "content-type": "application/json" },
    body: JSON.stringify({ object: `images/${assetId}/canonical-${row.canonical_attempt}.png`, method: "GET" }),
  });
  const grant = Grant.parse(await grantRes.json());
  const t = performance.now();
  const res = await fetch(`${stack.urls.imageRuntime}${RUNTIME_PATHS.imageFeatures}`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.secrets.imageRuntime}`, "content-type": "application/json" },
    body: JSON.stringify({ image: { url: grant.url, headers: grant.headers }, bytes: Number(row.canonical_bytes), sha256: row.canonical_sha256 }),
  });
  ImageFeaturesResponse.parse(await res.json());
  return performance.now() - t;
}

/**
 * Decisions on `items` with `model`, each image uploaded first; with `times`, each one interleaved
 * with the image runtime's direct read (first on even items, second on odd ones). The quality
 * summary: top-1 accuracy over the answers and "other" (the last outcome), ECE of the native
 * distribution's top probability, unknown-detection AUROC, and the correct count per group.
 */
async function evaluate(
  model: string,
  questions: Record<string, { criteria: Record<string, unknown> }>,
  items: { group: string; truth: number; png: () => Promise<Uint8Array> }[],
  times?: { gateway: number[]; direct: number[] },
): Promise<{ summary: string; byGroup: string }> {
  const [questionId] = Object.keys(questions);
  const other = Object.keys(questions[questionId!]!.criteria).length;
  const native: number[][] = [];
  for (const [index, item] of items.entries()) {
    const assetId = await uploadImage(stack.baseUrl, benchKey, await item.png(), "prediction");
    const decide = async () => {
      const t = performance.now();
      const res = await fetch(`${stack.baseUrl}/v1/systemone`, {
        method: "POST",
        headers: { authorization: `Bearer ${benchKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model, state: "", images: [{ asset_id: assetId }], questions }),
      });
      const body = await res.json();
      times?.gateway.push(performance.now() - t);
      if (res.status !== 200) throw new Error(`decision: HTTP ${res.status} ${JSON.stringify(body)}`);
      const answer = DecisionResponse.parse(body).answers.get(questionId!) as ChoiceAnswer;
      const u = answer.unknown_probability!;
      native.push([...answer.probabilities.values()].map((p) => p * (1 - u)).concat(u));
    };
    if (!times) await decide();
    else if (index % 2 === 0) {
      await decide();
      times.direct.push(await directRead(assetId));
    } else {
      times.direct.push(await directRead(assetId));
      await decide();
    }
  }
  const argmax = (p: number[]) => p.indexOf(Math.max(...p));
  const correct = native.map((p, i) => argmax(p) === items[i]!.truth);
  const accuracy = correct.filter(Boolean).length / correct.length;
  const calibration = eceOfBins(reliabilityBins(native.map((p) => Math.max(...p)), correct, 10));
  const unknownAuroc = auroc(native.map((p) => p[other]!), items.map((item) => item.truth === other));
  const groups = [...new Set(items.map((item) => item.group))];
  const byGroup = groups.map((group) => {
    const mine = items.map((item, i) => ({ item, i })).filter(({ item }) => item.group === group);
    return `${group} ${mine.filter(({ i }) => correct[i]).length}/${mine.length}`;
  });
  return {
    summary: `top-1 accuracy ${accuracy.toFixed(3)} (chance ${(1 / (other + 1)).toFixed(3)}), ECE ${calibration.toFixed(3)}, unknown-detection AUROC ${unknownAuroc?.toFixed(3) ?? "n/a"}`,
    byGroup: byGroup.join(", "),
  };
}

/** scikit-learn's digits (from the PyPI wheel) drawn as 64 x 64 PNGs: rows of 64 values 0-16 and the digit. */
async function digitsDataset(): Promise<{ digit: number; index: number; png: () => Promise<Uint8Array> }[]> {
  const dir = mkdtempSync(join(tmpdir(), "digits-"));
  try {
    execFileSync("python3", ["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--dest", dir, "scikit-learn==1.5.2"]);
    const wheel = join(dir, readdirSync(dir).find((name) => name.endsWith(".whl"))!);
    const csv = execFileSync("python3", ["-c", "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('sklearn/datasets/data/digits.csv.gz'))", wheel], { maxBuffer: 1 << 24 });
    const rows = gunzipSync(csv).toString("utf8").trim().split("\n");
    return rows.map((row, index) => {
      const values = row.split(",").map(Number);
      const digit = values[64]!;
      const png = async () => {
        const gray = Buffer.from(values.slice(0, 64).map((v) => 255 - Math.round((v * 255) / 16)));
        return new Uint8Array(await sharp(gray, { raw: { width: 8, height: 8, channels: 1 } }).resize(64, 64, { kernel: "nearest" }).toColourspace("srgb").png().toBuffer());
      };
      return { digit, index, png };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The digits: a model trained on the training rows, measured on the evaluation rows (index a multiple of 5). */
async function digitsPart(key: string, userToken: string): Promise<void> {
  const NAMES = ["zero", "one", "two", "three"];
  const question = { digit: { type: "choice", instructions: "Which digit is written?", criteria: Object.fromEntries(NAMES.map((name) => [name, null])) } };
  const all = await digitsDataset();
  const evaluationRows = all.filter((row) => row.index % 5 === 0);
  const trainingRows = all.filter((row) => row.index % 5 !== 0);
  const known = (digit: number) => digit < NAMES.length;
  const chosen = [
    ...NAMES.flatMap((_, digit) => trainingRows.filter((row) => row.digit === digit).slice(0, DIGITS_PER_CLASS)),
    ...trainingRows.filter((row) => !known(row.digit)).slice(0, DIGITS_PER_CLASS),
  ];
  const started = performance.now();
  const labelled: LabelledImage[] = [];
  for (const row of chosen) {
    labelled.push({ customId: `digit-${row.index}`, assetId: await uploadImage(stack.baseUrl, key, await row.png(), "training"), label: known(row.digit) ? NAMES[row.digit]! : null });
  }
  const training = await trainImageModel(stack.baseUrl, userToken, imageTrainingFile(labelled, question));
  const accepted = training.evaluation?.questions[0];
  console.log(
    `\nscikit-learn digits: ${training.status} ${training.model ?? ""} on ${chosen.length} training rows (${DIGITS_PER_CLASS} of each of 0-3, ${DIGITS_PER_CLASS} of 4-9) in ` +
      `${((performance.now() - started) / 1000).toFixed(1)} s; its own held-out part: top-1 ${accepted?.candidate.toFixed(3)} vs chance ${accepted?.zero_shot.toFixed(3)}, ECE ${accepted?.ece.toFixed(3)}`,
  );
  if (training.status !== "ready") return;
  const items = evaluationRows.map((row) => ({ group: known(row.digit) ? NAMES[row.digit]! : "4-9", truth: known(row.digit) ? row.digit : NAMES.length, png: row.png }));
  const result = await evaluate(training.model!, question, items);
  console.log(`quality on its ${items.length} evaluation rows (index a multiple of 5, never trained on):`);
  console.log(`  ${result.summary}`);
  console.log(`  correct by digit: ${result.byGroup}`);
}
