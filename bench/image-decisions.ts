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
 *     npm run bench:image-decisions            # about a minute on 2 CPU cores
 *     PER_KIND=80 npm run bench:image-decisions
 *
 * Figures of the run on 2026-11-25 (2-core CPU, no GPU; EfficientNet-Lite0 256 x 256 on
 * onnxruntime-node 1.30.0, 120 evaluation drawings): see the README, "Image models and image
 * decisions", where they are quoted with the command.
 */
import { readFileSync } from "node:fs";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
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
const EVAL_FROM = 5001;
const QUESTIONS = { [DEMO_QUESTION_ID]: DEMO_QUESTION };

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
  const native: number[][] = [];
  for (const item of evaluation) {
    const assetId = await uploadImage(base, key, await demoImage(item.kind, item.seed), "prediction");
    // Baseline first on odd items, second on even ones: neither path always runs warm.
    const runDirect = () => directRead(assetId);
    const runGateway = async () => {
      const t = performance.now();
      const res = await fetch(`${base}/v1/systemone`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: training.model, state: "", images: [{ asset_id: assetId }], questions: QUESTIONS }),
      });
      const body = await res.json();
      gateway.push(performance.now() - t);
      if (res.status !== 200) throw new Error(`decision: HTTP ${res.status} ${JSON.stringify(body)}`);
      const answer = DecisionResponse.parse(body).answers.get(DEMO_QUESTION_ID) as ChoiceAnswer;
      const u = answer.unknown_probability!;
      native.push([...answer.probabilities.values()].map((p) => p * (1 - u)).concat(u));
    };
    if (evaluation.indexOf(item) % 2 === 0) {
      await runGateway();
      direct.push(await runDirect());
    } else {
      direct.push(await runDirect());
      await runGateway();
    }
  }

  const truth = evaluation.map((item) => item.truth);
  const argmax = (p: number[]) => p.indexOf(Math.max(...p));
  const correct = native.map((p, i) => argmax(p) === truth[i]);
  const accuracy = correct.filter(Boolean).length / correct.length;
  const calibration = eceOfBins(reliabilityBins(native.map((p) => Math.max(...p)), correct, 10));
  const unknownAuroc = auroc(native.map((p) => p[2]!), truth.map((t) => t === 2));
  const perKind = DEMO_KINDS.map((kind) => {
    const mine = evaluation.map((item, i) => ({ item, i })).filter(({ item }) => item.kind === kind);
    return `${kind} ${mine.filter(({ i }) => correct[i]).length}/${mine.length}`;
  });
  console.log(`\nquality on ${evaluation.length} drawings it never saw (seeds ${EVAL_FROM}-${EVAL_FROM + PER_KIND - 1}; answers circle, square, and other):`);
  console.log(`  top-1 accuracy ${accuracy.toFixed(3)} (chance 0.333), ECE ${calibration.toFixed(3)}, unknown-detection AUROC ${unknownAuroc?.toFixed(3) ?? "n/a"}`);
  console.log(`  correct by kind: ${perKind.join(", ")}`);

  const pct = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
  console.log(`\nlatency per decision, ${gateway.length} decisions, interleaved with the baseline (the image runtime's own read, called directly):`);
  console.log(`                          p50 ms    p95 ms`);
  console.log(`  through the edge      ${pct(gateway, 0.5).toFixed(1).padStart(8)}  ${pct(gateway, 0.95).toFixed(1).padStart(8)}`);
  console.log(`  image runtime only    ${pct(direct, 0.5).toFixed(1).padStart(8)}  ${pct(direct, 0.95).toFixed(1).padStart(8)}`);
  console.log(`  ratio                 ${(pct(gateway, 0.5) / pct(direct, 0.5)).toFixed(2).padStart(8)}  ${(pct(gateway, 0.95) / pct(direct, 0.95)).toFixed(2).padStart(8)}`);

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
