/**
 * Execution of one decision on one runtime (runs in the sidecar, under Bun on the GPU host): admit
 * the request (admission.ts: at most a tokenize call, no GPU work), then run every pass (the next one
 * sent while the one before is evaluated) and read the answers out. The sidecar admits before
 * it takes a lane and runs once its turn comes.
 *
 *     const admission = await admitDecision(client, release, { state, questions }, signal);
 *     const { answers, usage, passes } = await runDecision(client, release, admission, signal);
 *     // or both: await executeDecision(client, release, { state, questions }, signal);
 *
 * The served readout has three steps after rendering (SERVED_STEPS, steps.ts), each measured by the
 * quality benchmark on words and by the training benchmark on sentences: every label's surface forms
 * summed, contextual calibration against a content-free pass (single-pass questions), and the
 * release's own calibration (calibration.ts). A trained release reads its heads instead (trained.ts).
 * Passes go through a PassRunner (passes.ts).
 *
 * Every runtime response must name the runtime identity the release expects: admission and the
 * PassRunner check every stamp (identity.ts), so a response from another runtime ends the
 * execution with IdentityMismatchError before any answer is built from it. Nothing is retried: a
 * failed pass fails the decision, and the caller decides what the customer sees.
 */
import { Questions, type Answer, type ChoiceQuestion, type Question, type Usage } from "../../contract/decision.ts";
import { parseJson, stringifyJson } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { taskDifference } from "../../contract/training-file.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import type { SavedTask } from "../../server-shared/trained.ts";
import type { RuntimeClient } from "../runtime/client.ts";
import { admit, type Admission, type AdmittedQuestion } from "./admission.ts";
import { IDENTITY_CALIBRATION } from "./calibration.ts";
import { contentFreeKey, contentFreeReadings } from "./content-free.ts";
import { runtimeOf, type Release, type RuntimeIdentity } from "./identity.ts";
import type { ResolvedLabels } from "./labels.ts";
import { PassRunner, type PassGroups } from "./passes.ts";
import {
  calibratedAnswer,
  choiceAnswer,
  chunkProbabilities,
  contextualProbabilities,
  meanDistribution,
  mergeChunks,
  noulAnswer,
  optionMass,
  probabilities,
  scoreAnswer,
  selectFinalists,
} from "./readout.ts";
import { renderChoice, type Pass, type Reading, type Rendering } from "./render.ts";
import { SERVED_STEPS, TRAINED_STEPS, type Steps } from "./steps.ts";
import { runTrained } from "./trained.ts";

export interface Execution {
  /** Keyed by the request's question ids, in request order. */
  answers: Map<string, Answer>;
  usage: Usage;
  /** Passes run, content-free and final passes included. */
  passes: number;
}

export async function executeDecision(
  client: RuntimeClient,
  release: Release,
  request: Decision,
  signal?: AbortSignal,
  steps: Steps = SERVED_STEPS,
  /** The groups its passes share with other background work, and its rank among them (passes.ts PassGroups); its own by default. */
  place?: { groups: PassGroups; rank: number },
): Promise<Execution> {
  return runDecision(client, release, await admitDecision(client, release, request, signal, steps), signal, steps, place);
}

/**
 * Admission (admission.ts) against the runtime `release` names: no pass runs. A trained release
 * takes only its saved task: any other question set is refused with 422 `task_mismatch` saying what
 * differs.
 */
export function admitDecision(client: RuntimeClient, release: Release, request: Decision, signal?: AbortSignal, steps: Steps = SERVED_STEPS): Promise<Admission> {
  signal?.throwIfAborted();
  if (release.trained) {
    checkTask(release.trained.task, request.questions);
    steps = TRAINED_STEPS;
  }
  return admit(client, runtimeOf(release), request, { rendering: steps.rendering, contextual: steps.contextual, bothOrders: steps.bothOrders }, signal);
}

/** Refuses a question set that is not exactly the saved task (ids, types, instructions, criteria, in order). */
function checkTask(task: SavedTask, questions: Decision["questions"]): void {
  if (stringifyJson(questions) === task.questions) return;
  const saved = Questions.parse(parseJson(task.questions, { maxDepth: LIMITS.jsonDepth }));
  throw new ServiceError("task_mismatch", `this trained model answers only the questions it was trained on: ${taskDifference(saved, questions)}`);
}

/**
 * Every pass of an admitted decision, and its answers. The content-free passes not kept yet
 * (content-free.ts), then every question's content passes in request order, are asked for together and go
 * to the runtime as one group (passes.ts PassGroups): the content passes share the rendered state as
 * their prefix and the content-free passes one of their own, each evaluated once, and all their rests
 * in one decode. A chunked choice's final pass follows its chunks in a second group.
 */
export async function runDecision(
  client: RuntimeClient,
  release: Release,
  admission: Admission,
  signal?: AbortSignal,
  steps: Steps = SERVED_STEPS,
  /** The groups of a bulk execution's records, and this record's rank among them (passes.ts PassGroups); its own by default. */
  place?: { groups: PassGroups; rank: number },
): Promise<Execution> {
  const runtime = runtimeOf(release);
  const runner = new PassRunner(client, runtime, admission.fixed, signal, steps.shared, place);
  if (release.trained) {
    const answers = await runTrained(runner, release.trained.heads, admission);
    return { answers, usage: runner.usage(), passes: runner.passes };
  }
  const calibration = steps.calibration ? (release.calibration ?? IDENTITY_CALIBRATION) : IDENTITY_CALIBRATION;
  // The content-free passes first, so that the state is what the runtime keeps for a chunked choice's final pass.
  const [free, content] = await Promise.all([
    Promise.all(admission.questions.map(({ plan, words }) => readContentFree(runner, runtime, plan.readings, words, steps.shared))),
    Promise.all(admission.questions.map((admitted) => readContent(runner, steps.rendering, admission.stateText, admitted))),
  ]);
  const answers = new Map(admission.questions.map((admitted, i) => [admitted.id, calibratedAnswer(answerOf(admitted.question, content[i]!, free[i]!), calibration)]));
  return { answers, usage: runner.usage(), passes: runner.passes };
}

/** A question's content passes, read: each reading's logprobs (key order or reversed), or a chunked choice's merged distribution. */
interface ContentRead {
  readings: number[][];
  chunked: number[] | null;
  /** Every content pass's logprobs, for the option mass. */
  all: number[][];
}

async function readContent(runner: PassRunner, rendering: Rendering, stateText: string, { question, plan, words }: AdmittedQuestion): Promise<ContentRead> {
  const all: number[][] = [];
  if (question.type === "choice" && plan.chunks.length > 0) {
    // The chunk passes are the question's own input; the final pass re-reads some of its options.
    const read = async (passes: Pass[], billed: boolean) => {
      const logprobs = await Promise.all(passes.map((pass) => runner.run(pass, words, billed)));
      all.push(...logprobs);
      return logprobs;
    };
    return { readings: [], chunked: await chunkedChoice(read, rendering, stateText, question, plan.chunks), all };
  }
  // A second reading (the options reversed: the benchmark's both-orders step) repeats the question's input.
  const readings = await Promise.all(plan.readings.map(({ pass }, i) => runner.run(pass, words, i === 0)));
  all.push(...readings);
  return { readings, chunked: null, all };
}

/** Each reading's content-free logprobs (null where a reading has none): kept ones, and the others read now and kept. */
function readContentFree(runner: PassRunner, runtime: RuntimeIdentity, readings: Reading[], words: ResolvedLabels | null, keep: boolean): Promise<(readonly number[] | null)[]> {
  return Promise.all(
    readings.map(({ contentFree }) => {
      if (!contentFree) return null;
      if (!keep) return runner.run(contentFree, words, false);
      return keptContentFree(runner, runtime, contentFree, words);
    }),
  );
}

/** Content-free readings being read, by runtime fingerprint and pass key: the executions that need one at once (a bulk execution's records) read it once. */
const reading = new Map<string, Promise<readonly number[]>>();

/** A content-free pass's logprobs: kept, being read by another execution, or read now and kept. */
async function keptContentFree(runner: PassRunner, runtime: RuntimeIdentity, pass: Pass, words: ResolvedLabels | null): Promise<readonly number[]> {
  const key = contentFreeKey(pass);
  const kept = contentFreeReadings.get(runtime, key);
  if (kept) return kept;
  const full = `${runtime.fingerprint}\n${key}`;
  const other = reading.get(full);
  if (other) {
    try {
      return await other;
    } catch {
      // Its reader failed (its own runtime call, or its caller gave up): read it here.
    }
  }
  const mine = runner.run(pass, words, false);
  reading.set(full, mine);
  try {
    return contentFreeReadings.set(runtime, key, await mine);
  } finally {
    if (reading.get(full) === mine) reading.delete(full);
  }
}

/** One question's answer before the release's calibration, with the mean option mass of its content passes. */
function answerOf(question: Question, content: ContentRead, free: (readonly number[] | null)[]): Answer {
  const p =
    content.chunked ??
    meanDistribution(
      content.readings.map((logprobs, i) => {
        const pi = free[i] ? contextualProbabilities(logprobs, free[i]!) : probabilities(logprobs);
        // The second reading offers the options reversed: back in key order.
        return i === 0 ? pi : pi.reverse();
      }),
    );
  const option_mass = content.all.reduce((sum, logprobs) => sum + optionMass(logprobs), 0) / content.all.length;
  if (question.type === "noul") return { ...noulAnswer(p), option_mass };
  if (question.type === "score") return { ...scoreAnswer(question.criteria, p), option_mass };
  return { ...choiceAnswer([...question.criteria.keys()], p), option_mass };
}

/**
 * A choice with more options than one pass offers: its chunk passes, then one final pass over the
 * finalists (in key order). The final pass's size was admitted on the byte bound of the worst
 * finalist set, which bounds every actual set.
 */
async function chunkedChoice(
  read: (passes: Pass[], billed: boolean) => Promise<number[][]>,
  rendering: Rendering,
  stateText: string,
  q: ChoiceQuestion,
  chunks: Pass[],
): Promise<number[]> {
  const names = [...q.criteria.keys()];
  const chunkLogprobs = await read(chunks, true);
  const pChunk = chunkProbabilities(chunkLogprobs);
  const finalists = selectFinalists(names, pChunk);
  const finalLogprobs = finalists.length > 1 ? (await read([renderChoice(rendering, stateText, q, finalists)], false))[0]! : null;
  return mergeChunks(names, pChunk, finalists, finalLogprobs);
}

