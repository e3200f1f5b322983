/**
 * A trained release's readout, and training's reading of an example the same way: per question,
 * the served rendering's first content pass with the base's hidden states (TRAINED_STEPS), and the
 * state's sentence embedding where a head reads it (train/features.ts). A trained release answers
 * with its heads applied to those blocks (execute.ts runs it for a release with `trained`); a
 * training reads the same blocks of each example (`exampleFeatures`), so a head is fitted on exactly
 * what it will read when it serves.
 */
import type { Answer, Usage } from "../../contract/decision.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import type { TrainedHeads } from "../../server-shared/trained.ts";
import { flattenReads, headInput, type QuestionRead } from "../train/features.ts";
import { applyHead } from "../train/head.ts";
import type { RuntimeClient } from "../runtime/client.ts";
import { admit, type Admission, type AdmittedQuestion } from "./admission.ts";
import { runtimeOf, type Release } from "./identity.ts";
import { PassRunner, type PassGroups } from "./passes.ts";
import { choiceAnswer, noulAnswer, optionMass, scoreAnswer } from "./readout.ts";
import { TRAINED_STEPS } from "./steps.ts";

/**
 * A trained release's answers: per question, one pass with the base's hidden states, and the state's
 * sentence embedding where a head reads it (from the encoder the head names, or 503
 * `identity_mismatch`); the question's head applied to the blocks it reads (train/features.ts). The
 * answers have the shared model's wire shape; `option_mass` is the pass's.
 */
export async function runTrained(runner: PassRunner, heads: TrainedHeads, admission: Admission): Promise<Map<string, Answer>> {
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
  /** The groups its passes share with other background work, and its rank among them (passes.ts PassGroups); its own by default. */
  place?: { groups: PassGroups; rank: number },
): Promise<{ features: number[]; embedding: { encoder: string; values: number[] } | null; usage: Usage }> {
  const admission = await admit(client, runtimeOf(release), request, { rendering: TRAINED_STEPS.rendering, contextual: false, bothOrders: false }, signal);
  const runner = new PassRunner(client, runtimeOf(release), admission.fixed, signal, true, place);
  const [read, embedding] = await Promise.all([
    Promise.all(admission.questions.map((admitted) => readQuestion(runner, admitted, true))),
    embed ? runner.embed(admission.stateText) : null,
  ]);
  return { features: flattenReads(read), embedding: embedding && { encoder: embedding.encoder, values: embedding.embedding }, usage: runner.usage() };
}
