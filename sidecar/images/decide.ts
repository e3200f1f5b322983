/**
 * An image model's decision (runs in the sidecar, under Bun on the GPU host): the image runtime reads
 * the asset's canonical PNG through a read grant and answers the backbone's features (its stamp
 * checked, as every runtime response's is); the trained head turns them into a distribution over the
 * question's answers and "other"; the answer says it the spec's way.
 *
 *     const { features, visualTokens } = await readImageFeatures(client, runtimeOf(release), { image: grant, bytes, sha256 }, signal);
 *     const answer = imageAnswer(question, applyHead(head, features));
 *     // {type: "choice", choice, probabilities (conditional on a known answer), confidence, unknown_probability}
 *
 * A trained image model ignores the decision's state: it reads the photo alone. The state and the
 * question are still billed once, as the spec's billable tokens count them (contract/credit.ts).
 */
import { textTokensOf } from "../../contract/credit.ts";
import type { ChoiceAnswer, ChoiceQuestion, Questions as QuestionsSchema, Usage } from "../../contract/decision.ts";
import { stringifyJson, type Json } from "../../contract/json.ts";
import type { ImageFeaturesCall } from "../../server-shared/runtime-protocol.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { IdentityMismatchError, type RuntimeIdentity } from "../decide/identity.ts";
import { RuntimeError, type ImageRuntimeClient } from "../runtime/client.ts";
import type { z } from "zod";

type Questions = z.infer<typeof QuestionsSchema>;

/** The backbone's features of one image, from a runtime shown to be `runtime`. */
export async function readImageFeatures(
  client: ImageRuntimeClient,
  runtime: RuntimeIdentity,
  call: ImageFeaturesCall,
  signal?: AbortSignal,
): Promise<{ features: number[]; visualTokens: number }> {
  const response = await client.imageFeatures(call, signal);
  if (response.release_id !== runtime.id || response.fingerprint !== runtime.fingerprint) throw new IdentityMismatchError(runtime, response);
  if (!response.features.every(Number.isFinite)) throw new RuntimeError("the image runtime sent non-finite features", 200, "malformed");
  return { features: response.features, visualTokens: response.visual_tokens };
}

/**
 * The answer to `question` from the native distribution over its answers, in outcome order, then
 * "other" (the last entry): the answers' probabilities conditional on a known answer, the unknown
 * mass as it is, and as confidence one minus the distribution's entropy over its largest possible
 * (log of answers + 1): 1 when all mass is on one outcome, 0 when it is spread evenly.
 */
export function imageAnswer(question: ChoiceQuestion, distribution: readonly number[]): ChoiceAnswer {
  const names = [...question.criteria.keys()];
  if (distribution.length !== names.length + 1) throw new Error(`a head of ${distribution.length} outcomes cannot answer ${names.length} answers and other`);
  const unknown = distribution[names.length]!;
  const known = distribution.slice(0, names.length);
  const total = known.reduce((sum, p) => sum + p, 0);
  const conditional = total > 0 ? known.map((p) => p / total) : known.map(() => 1 / names.length);
  // Ties go to the first answer in the question's order (the outcome order).
  const best = conditional.reduce((at, p, i) => (p > conditional[at]! ? i : at), 0);
  const entropy = -distribution.reduce((sum, p) => (p > 0 ? sum + p * Math.log(p) : sum), 0);
  const confidence = Math.min(1, Math.max(0, 1 - entropy / Math.log(distribution.length)));
  return {
    type: "choice",
    choice: names[best]!,
    probabilities: new Map(names.map((name, i) => [name, conditional[i]!])),
    confidence,
    unknown_probability: Math.min(1, Math.max(0, unknown)),
  };
}

/**
 * An image decision's usage: the runtime processed its visual tokens (and read one answer); what is
 * billed is those and one canonical copy of the state and question (contract/credit.ts).
 */
export function imageUsage(visualTokens: number, state: Json, questions: Questions): Usage {
  return { input_tokens: visualTokens, output_tokens: 1, billable_input_tokens: visualTokens + textTokensOf(stringifyJson({ state, questions })) };
}

/**
 * The one question of an image decision, checked against the model's saved task: the same question
 * (instructions and descriptions included), its answers in the saved outcome order. Throws 422
 * `task_mismatch` saying what differs.
 */
export function checkImageTask(savedQuestions: Questions, questions: Questions): { id: string; question: ChoiceQuestion } {
  const [[savedId, saved]] = [...savedQuestions] as [[string, ChoiceQuestion]];
  const [[id, question]] = [...questions] as [[string, ChoiceQuestion]];
  const refuse = (what: string) => new ServiceError("task_mismatch", `questions: ${what}; an image model answers exactly the question it was trained on`);
  if (id !== savedId) throw refuse(`the question id is ${JSON.stringify(id.slice(0, 40))}, the model's is ${JSON.stringify(savedId.slice(0, 40))}`);
  if (question.type !== "choice") throw refuse(`the question is ${question.type}, the model's is a choice`);
  const names = [...question.criteria.keys()];
  const order = [...saved.criteria.keys()];
  if (names.length !== order.length || names.some((name) => !saved.criteria.has(name))) {
    throw refuse(`the answers are ${JSON.stringify(names.slice(0, 16))}, the model's are ${JSON.stringify(order)}`);
  }
  if (names.some((name, i) => name !== order[i])) throw refuse(`the answers must be given in the model's outcome order ${JSON.stringify(order)}, not ${JSON.stringify(names)}`);
  if (stringifyJson(question) !== stringifyJson(saved)) throw refuse("the instructions or an answer's description differ from the model's");
  return { id, question };
}
