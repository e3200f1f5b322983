/**
 * Execution of one decision on one runtime (runs in the sidecar, under Bun on the GPU host): admit
 * the request, resolve the labels, run every pass serially, and read the answers out.
 *
 *     const { answers, usage, passes } = await executeDecision(client, { id, fingerprint }, { state, questions }, signal);
 *
 * Every score response must name the release the registry chose; one that does not ends the
 * execution with IdentityMismatchError before any answer is built from it. Nothing is retried: a
 * failed pass fails the decision, and the caller decides what the customer sees.
 */
import type { Answer, ChoiceQuestion, Usage } from "../../contract/decision.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import { LIMITS } from "../../contract/limits.ts";
import { renderChoice, type Pass } from "./render.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { RuntimeClient } from "../runtime/client.ts";
import { admit, type AdmittedQuestion } from "./admission.ts";
import { labelCache, labelTokens, resolveLabels, type ResolvedLabels } from "./labels.ts";
import { chunkProbabilities, choiceAnswer, mergeChunks, noulAnswer, probabilities, scoreAnswer, selectFinalists } from "./readout.ts";

export interface Release {
  id: string;
  fingerprint: string;
  /** Calibration temperature of the release's readout; 1 (the raw distribution) when absent. */
  temperature?: number;
  /** The runtime's published per-pass limit, when it is below the spec's. */
  maxTokensPerPass?: number;
}

export interface Execution {
  /** Keyed by the request's question ids, in request order. */
  answers: Map<string, Answer>;
  usage: Usage;
  /** Passes run, final passes included. */
  passes: number;
}

/**
 * A runtime named another release or fingerprint than the one this execution was admitted for (a
 * misrouted or swapped runtime). The caller sees 503 with no answer; the operator note says what
 * differed.
 */
export class IdentityMismatchError extends ServiceError {
  override readonly name = "IdentityMismatchError";
  constructor(
    /** The release the execution was admitted for. */
    readonly release: { id: string; fingerprint: string },
    /** What the runtime said it computed with. */
    readonly actual: { release_id: string; fingerprint: string },
  ) {
    super(
      "identity_mismatch",
      "the model runtime does not serve the registered release; no answer was produced",
      `refusing release ${release.id}: runtime reported ${actual.release_id} (fingerprint ${actual.fingerprint.slice(0, 12)}), ` +
        `expected ${release.id} (fingerprint ${release.fingerprint.slice(0, 12)})`,
    );
  }
}

export async function executeDecision(
  client: RuntimeClient,
  release: Release,
  request: Decision,
  signal?: AbortSignal,
): Promise<Execution> {
  signal?.throwIfAborted();
  const admission = await admit(client, request, signal, Math.min(LIMITS.tokensPerPass, release.maxTokensPerPass ?? LIMITS.tokensPerPass));
  const cached = labelCache.get(release.fingerprint);
  const runner = new PassRunner(client, release, cached ?? (await resolveLabels(client, signal)), signal);
  const answers = new Map<string, Answer>();
  for (const admitted of admission.questions) answers.set(admitted.id, await answer(runner, admission.stateText, admitted, release.temperature ?? 1));
  // Kept only now that the passes have proved the runtime serves this fingerprint.
  if (!cached) labelCache.set(release.fingerprint, runner.labels);
  return {
    answers,
    usage: { input_tokens: runner.inputTokens, output_tokens: runner.passes },
    passes: runner.passes,
  };
}

async function answer(runner: PassRunner, stateText: string, { question, plan }: AdmittedQuestion, temperature: number): Promise<Answer> {
  if (question.type === "noul") return noulAnswer(probabilities(await runner.run(plan.passes[0]!), temperature));
  if (question.type === "score") return scoreAnswer(question.criteria, probabilities(await runner.run(plan.passes[0]!), temperature));
  const names = [...question.criteria.keys()];
  if (plan.passes.length === 1) return choiceAnswer(names, probabilities(await runner.run(plan.passes[0]!), temperature));
  return choiceAnswer(names, await chunkedChoice(runner, stateText, question, plan.passes, temperature));
}

/**
 * A choice with more options than one pass offers: its chunk passes, then one final pass over the
 * finalists (in key order). The final pass's size was admitted on the byte bound of the worst
 * finalist set, which bounds every actual set.
 */
async function chunkedChoice(runner: PassRunner, stateText: string, q: ChoiceQuestion, chunks: Pass[], temperature: number): Promise<number[]> {
  const names = [...q.criteria.keys()];
  const chunkLogprobs: number[][] = [];
  for (const pass of chunks) chunkLogprobs.push(await runner.run(pass));
  const pChunk = chunkProbabilities(chunkLogprobs, temperature);
  const finalists = selectFinalists(names, pChunk);
  const finalLogprobs = finalists.length > 1 ? await runner.run(renderChoice(stateText, q, finalists)) : null;
  return mergeChunks(names, pChunk, finalists, finalLogprobs, temperature);
}

/** Runs passes one after the other, checking each response's identity and counting usage. */
class PassRunner {
  inputTokens = 0;
  passes = 0;

  constructor(
    private readonly client: RuntimeClient,
    private readonly release: Release,
    readonly labels: ResolvedLabels,
    private readonly signal?: AbortSignal,
  ) {}

  /** The label log-probabilities of one pass, in the pass's label order. */
  async run(pass: Pass): Promise<number[]> {
    // Once the caller has given up, no further pass is sent.
    this.signal?.throwIfAborted();
    const response = await this.client.score({ segments: pass.segments, label_tokens: labelTokens(this.labels, pass.labels) }, this.signal);
    if (response.release_id !== this.release.id || response.fingerprint !== this.release.fingerprint) {
      throw new IdentityMismatchError(this.release, response);
    }
    if (response.logprobs.length !== pass.labels.length) {
      throw new Error(`runtime returned ${response.logprobs.length} log-probabilities for ${pass.labels.length} labels`);
    }
    this.inputTokens += response.prompt_tokens;
    this.passes += 1;
    return response.logprobs;
  }
}
