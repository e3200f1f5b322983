/**
 * Execution of one decision on one runtime (runs in the sidecar, under Bun on the GPU host): admit
 * the request (admission.ts: at most a tokenize call, no GPU work), then run every pass (the next one
 * sent while the one before is evaluated) and read the answers out. The sidecar admits before it takes a lane and runs once its turn comes.
 *
 *     const admission = await admitDecision(client, release, { state, questions }, signal);
 *     const { answers, usage, passes } = await runDecision(client, release, admission, signal);
 *     // or both: await executeDecision(client, release, { state, questions }, signal);
 *
 * The served readout has three steps after rendering (SERVED_STEPS), each measured by the quality
 * benchmark on words and by the training benchmark on sentences: every label's surface forms summed,
 * contextual calibration against a content-free pass (single-pass questions), and the release's own
 * calibration (calibration.ts). The benchmarks run the earlier steps alone through `steps`, and a
 * step that is not served (both option orders) beside them.
 *
 * Every runtime response must name the runtime identity the release expects: both entry points wrap
 * the client in identity.ts's `verifiedClient`, so a response from another runtime ends the
 * execution with IdentityMismatchError before any answer is built from it. Nothing is retried: a
 * failed pass fails the decision, and the caller decides what the customer sees.
 */
import { Questions, type Answer, type ChoiceQuestion, type Question, type Usage } from "../../contract/decision.ts";
import { parseJson, stringifyJson } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { taskDifference } from "../../contract/training-file.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { SavedTask, TrainedHeads } from "../../server-shared/trained.ts";
import { applyHead } from "../train/head.ts";
import { flattenReads, headInput, type QuestionRead } from "../train/features.ts";
import type { EmbedResponse } from "../../server-shared/runtime-protocol.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import { renderChoice, SERVED_RENDERING, type Pass, type Reading, type Rendering } from "./render.ts";
import { RuntimeError, type RuntimeClient } from "../runtime/client.ts";
import { admit, type Admission, type AdmittedQuestion } from "./admission.ts";
import { IDENTITY_CALIBRATION } from "./calibration.ts";
import { contentFreeKey, contentFreeReadings } from "./content-free.ts";
import { runtimeOf, verifiedClient, type Release, type RuntimeIdentity } from "./identity.ts";
import { labelTokens, type ResolvedLabels } from "./labels.ts";
import {
  calibratedAnswer,
  choiceAnswer,
  chunkProbabilities,
  contextualProbabilities,
  labelLogprobs,
  meanDistribution,
  mergeChunks,
  noulAnswer,
  optionMass,
  probabilities,
  scoreAnswer,
  selectFinalists,
} from "./readout.ts";

/** Which readout steps run: the served ones, or a prefix of them for the benchmark. */
export interface Steps {
  rendering: Rendering;
  /** Contextual calibration against a content-free pass. */
  contextual: boolean;
  /** Read a small choice in both option orders and average (render.ts BOTH_ORDERS_MAX_OPTIONS). */
  bothOrders: boolean;
  /** Apply the release's calibration. */
  calibration: boolean;
  /**
   * Evaluate the state once per request and keep content-free readings (content-free.ts). Not a
   * readout step: false is the benchmarks' baseline, every pass evaluated in full.
   */
  shared: boolean;
}

/**
 * Each step is kept only where it helps on both benchmarks. Both option orders is not: on words
 * (`npm run bench:quality`) it added 1.5 points of top-1, and on sentences (`npm run bench:training`,
 * 300 held-out items each) 1.3 on news sections and 14 on newsgroups, but it took State of the Union
 * periods (options in time order) from 0.360 to 0.250, chance, and it doubles a small choice's passes.
 * Contextual calibration helps on both.
 */
export const SERVED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: true, bothOrders: false, calibration: true, shared: true };

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
): Promise<Execution> {
  return runDecision(client, release, await admitDecision(client, release, request, signal, steps), signal, steps);
}

/**
 * The steps of a trained release: one pass per question, the served rendering's first content pass,
 * whose hidden state the question's head reads (trained.ts). Training reads its examples with them.
 */
export const TRAINED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: false, bothOrders: false, calibration: false, shared: true };

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
 * A trained release's answers: per question, one pass with the base's hidden states, and the state's
 * sentence embedding where a head reads it (from the encoder the head names, or 503
 * `identity_mismatch`); the question's head applied to the blocks it reads (train/features.ts). The
 * answers have the shared model's wire shape; `option_mass` is the pass's.
 */
async function runTrained(runner: PassRunner, heads: TrainedHeads, admission: Admission): Promise<Map<string, Answer>> {
  // Heads with `inputs` were trained on passes that pooled the state; older ones on passes that did not.
  const pooled = heads.questions.some((h) => h.inputs !== undefined);
  const encoder = heads.questions.find((h) => h.encoder)?.encoder;
  const [read, embedding] = await Promise.all([
    Promise.all(admission.questions.map((admitted) => readQuestion(runner, admitted, pooled))),
    encoder ? runner.embed(admission.stateText) : null,
  ]);
  if (embedding && embedding.encoder !== encoder) {
    throw new ServiceError(
      "identity_mismatch",
      "the model runtime does not serve the registered release; no answer was produced",
      `encoder mismatch: the trained head reads encoder ${encoder!.slice(0, 12)}, the runtime embeds with ${embedding.encoder.slice(0, 12)}`,
    );
  }
  return new Map(
    admission.questions.map(({ id, question }, i): [string, Answer] => {
      const head = heads.questions[i]!;
      const p = applyHead(head, headInput({ ...read[i]!, sentence_embedding: embedding?.embedding ?? [] }, head.inputs ?? ["answer_state"]));
      const option_mass = optionMass(read[i]!.label_logprobs);
      if (question.type === "noul") return [id, { ...noulAnswer(p), option_mass }];
      if (question.type === "score") return [id, { ...scoreAnswer(question.criteria, p), option_mass }];
      return [id, { ...choiceAnswer([...question.criteria.keys()], p), option_mass }];
    }),
  );
}

/** A question's first content pass (TRAINED_STEPS plans only it), with the base's hidden states (train/features.ts). */
async function readQuestion(runner: PassRunner, { plan, words }: AdmittedQuestion, pooled: boolean): Promise<QuestionRead> {
  const pass = plan.readings[0]?.pass;
  if (!pass || plan.chunks.length > 0) throw new ServiceError("invalid_request", "a trained model reads one pass per question");
  const read = await runner.runHidden(pass, words, pooled);
  return { answer_state: read.hidden, pooled_state: read.pooled ?? [], label_logprobs: read.logprobs, sentence_embedding: [] };
}

/**
 * The features of one example as training reads them, exactly as a trained release will read a
 * request: every question's blocks (train/features.ts flattenReads), in the task's order, and with
 * `embed` (the runtime has a sentence encoder) the state's embedding and the encoder's fingerprint.
 * `usage` counts its passes.
 */
export async function exampleFeatures(
  client: RuntimeClient,
  release: Release,
  request: Decision,
  signal?: AbortSignal,
  embed = false,
): Promise<{ features: number[]; embedding: { encoder: string; values: number[] } | null; usage: Usage }> {
  const admission = await admit(client, runtimeOf(release), request, { rendering: TRAINED_STEPS.rendering, contextual: false, bothOrders: false }, signal);
  const runner = new PassRunner(verifiedClient(client, runtimeOf(release)), admission.fixed, signal);
  const [read, embedding] = await Promise.all([
    Promise.all(admission.questions.map((admitted) => readQuestion(runner, admitted, true))),
    embed ? runner.embed(admission.stateText) : null,
  ]);
  return { features: flattenReads(read), embedding: embedding && { encoder: embedding.encoder, values: embedding.embedding }, usage: runner.usage() };
}

/**
 * Every pass of an admitted decision, and its answers. The content passes go first, every question's
 * in request order: they share the rendered state as their prefix, which the runtime evaluates once
 * (runtime-protocol.ts `prefix_segments`), and the next pass is sent while the one before is evaluated
 * (PassRunner), so the runtime does not wait between them. Then the content-free passes that are not
 * kept yet (content-free.ts), which share a prefix of their own.
 */
export async function runDecision(client: RuntimeClient, release: Release, admission: Admission, signal?: AbortSignal, steps: Steps = SERVED_STEPS): Promise<Execution> {
  const runtime = runtimeOf(release);
  const runner = new PassRunner(verifiedClient(client, runtime), admission.fixed, signal, steps.shared);
  if (release.trained) {
    const answers = await runTrained(runner, release.trained.heads, admission);
    return { answers, usage: runner.usage(), passes: runner.passes };
  }
  const calibration = steps.calibration ? (release.calibration ?? IDENTITY_CALIBRATION) : IDENTITY_CALIBRATION;
  const content = await Promise.all(admission.questions.map((admitted) => readContent(runner, steps.rendering, admission.stateText, admitted)));
  const free = await Promise.all(admission.questions.map(({ plan, words }) => readContentFree(runner, runtime, plan.readings, words, steps.shared)));
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
    readings.map(async ({ contentFree }) => {
      if (!contentFree) return null;
      if (!keep) return runner.run(contentFree, words, false);
      const key = contentFreeKey(contentFree);
      return contentFreeReadings.get(runtime, key) ?? contentFreeReadings.set(runtime, key, await runner.run(contentFree, words, false));
    }),
  );
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

/**
 * Passes an execution has at the runtime at once: the one being evaluated and the next, which the
 * runtime has read and tokenized by the time the first ends. No more: a runtime does not cancel a
 * pass whose caller went away, so an abandoned execution leaves at most one pass behind it.
 */
export const PASSES_IN_FLIGHT = 2;

/**
 * Runs passes in the order they are asked for, PASSES_IN_FLIGHT at a time, counting usage (the
 * client checks each response's identity). After a failure no further pass is sent.
 */
class PassRunner {
  inputTokens = 0;
  passes = 0;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  private failure: { error: unknown } | null = null;
  /** The logical input (usage.billable_input_tokens): the prefix once and each billed pass's rest; null once a billed pass had no prefix. */
  private billable: { prefix: number; rest: number } | null = { prefix: 0, rest: 0 };

  constructor(
    private readonly client: RuntimeClient,
    readonly fixed: ResolvedLabels,
    private readonly signal?: AbortSignal,
    /** Send each pass's prefix (the state), so the runtime evaluates it once; false evaluates every pass in full (a benchmark's baseline). */
    private readonly shared = true,
  ) {}

  /**
   * Each label's log-probability in one pass (its forms summed), in the pass's label order. `billed`:
   * the pass carries a question's own input (its first content pass, or a chunk of its options), so
   * its rest counts in the logical input.
   */
  async run(pass: Pass, words: ResolvedLabels | null, billed = false): Promise<number[]> {
    return (await this.send(pass, words, "none", billed)).logprobs;
  }

  /** The same, with the base's hidden state at the answer position (and with `pooled` the state's pooled one); always billed. */
  async runHidden(pass: Pass, words: ResolvedLabels | null, pooled = false): Promise<{ logprobs: number[]; hidden: number[]; pooled: number[] | null }> {
    const read = await this.send(pass, words, pooled ? "pooled" : "hidden", true);
    if (!read.hidden) throw new RuntimeError("the runtime returned no hidden state", 200, "malformed");
    if (pooled && !read.pooled) throw new RuntimeError("the runtime returned no pooled state", 200, "malformed");
    return { logprobs: read.logprobs, hidden: read.hidden, pooled: read.pooled ?? null };
  }

  /** The state's sentence embedding (not a pass: the runtime's encoder reads it beside the model). */
  embed(text: string): Promise<EmbedResponse> {
    if (this.failure) return Promise.reject(this.failure.error);
    this.signal?.throwIfAborted();
    return this.client.embed({ text }, this.signal);
  }

  /**
   * `input_tokens`: what the runtime evaluated (a kept prefix is not counted again); `output_tokens`:
   * one answer position per pass; `billable_input_tokens`: the state once and each question's own
   * input once, present when every billed pass had its prefix.
   */
  usage(): Usage {
    const billable = this.billable && this.billable.prefix > 0 ? { billable_input_tokens: this.billable.prefix + this.billable.rest } : {};
    return { input_tokens: this.inputTokens, output_tokens: this.passes, ...billable };
  }

  private async send(
    pass: Pass,
    words: ResolvedLabels | null,
    states: "none" | "hidden" | "pooled",
    billed: boolean,
  ): Promise<{ logprobs: number[]; hidden: number[] | undefined; pooled: number[] | undefined }> {
    if (this.inFlight < PASSES_IN_FLIGHT) this.inFlight += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve)); // the slot is handed over
    try {
      // Once the caller has given up, or a pass has failed, no further pass is sent.
      if (this.failure) throw this.failure.error;
      this.signal?.throwIfAborted();
      const groups = labelTokens(words ? new Map([...this.fixed, ...words]) : this.fixed, pass.labels);
      const prefix = this.shared && pass.prefixSegments > 0 ? { prefix_segments: pass.prefixSegments } : {};
      const asked = states === "none" ? {} : { hidden_state: true, ...(states === "pooled" && "prefix_segments" in prefix ? { pooled_state: true } : {}) };
      const response = await this.client.score({ segments: pass.segments, label_tokens: groups.flat(), ...prefix, ...asked }, this.signal);
      this.inputTokens += response.evaluated_tokens ?? response.prompt_tokens;
      this.passes += 1;
      if (billed) this.bill(response.prompt_tokens, response.prefix_tokens ?? 0);
      return { logprobs: labelLogprobs(response.logprobs, groups), hidden: response.hidden_state, pooled: response.pooled_state };
    } catch (err) {
      this.failure ??= { error: err };
      throw err;
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.inFlight -= 1;
    }
  }

  private bill(promptTokens: number, prefixTokens: number): void {
    if (!this.billable) return;
    if (prefixTokens === 0) {
      this.billable = null;
      return;
    }
    // Every content pass of a request has the same prefix: the state, counted once.
    this.billable.prefix = prefixTokens;
    this.billable.rest += promptTokens - prefixTokens;
  }
}
