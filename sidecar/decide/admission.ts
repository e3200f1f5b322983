/**
 * Admission of one decision before any GPU work (runs in the sidecar, under Bun on the GPU host):
 * every planned pass must fit the per-pass limit (LIMITS.tokensPerPass, or less where the runtime
 * publishes a smaller `max_tokens_per_pass`), or the request is refused with 422 naming the question.
 * This is what only the sidecar knows (its rendering, the runtime's tokenizer and limits); the
 * request-wide bound (contract/budget.ts) is checked by whoever admits the request, before quotas.
 *
 * A pass's UTF-8 byte count plus one bounds its tokens from above (render.ts), so only a
 * pass whose bound is over the limit is tokenized on the runtime and counted exactly. The adaptive
 * final pass of a chunked choice is not known before the chunks are read; it is admitted on its
 * byte bound alone (the spec: long descriptions can be refused though the real pass would fit).
 */
import type { Question } from "../../contract/decision.ts";
import { formatPath } from "../../contract/json.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { LIMITS } from "../../contract/limits.ts";
import { asText, passTokenBound, plannedPasses, planQuestion, wordCandidates, type Pass, type QuestionPlan, type Rendering } from "./render.ts";
import { resolveWords, type ResolvedLabels, type WordTokens } from "./labels.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import type { RuntimeClient } from "../runtime/client.ts";

export interface AdmittedQuestion {
  id: string;
  question: Question;
  plan: QuestionPlan;
  /** The question's word labels (option names, level texts) when it is read by words; null otherwise. */
  words: ResolvedLabels | null;
}

export interface Admission {
  stateText: string;
  /** In request order. */
  questions: AdmittedQuestion[];
}

export interface AdmissionOptions {
  rendering: Rendering;
  /** Plan each single-pass question's content-free pass too. */
  contextual: boolean;
  /** Plan a small choice's reading in reverse order too. */
  bothOrders: boolean;
  /** First tokens of option names and level texts known on this runtime (labels.ts). */
  words: WordTokens;
  tokensPerPass?: number;
}

/**
 * Plans every question (tokenizing its option names or level texts to see whether it can be read by
 * words) and checks the per-pass limit; throws ServiceError("invalid_request") on a violation.
 */
export async function admit(client: RuntimeClient, request: Decision, options: AdmissionOptions, signal?: AbortSignal): Promise<Admission> {
  const tokensPerPass = options.tokensPerPass ?? LIMITS.tokensPerPass;
  const stateText = asText(request.state);
  const questions: AdmittedQuestion[] = [];
  for (const [id, question] of request.questions) {
    const candidates = wordCandidates(options.rendering, question);
    const words = candidates && (await resolveWords(client, candidates, options.words, signal));
    const plan = planQuestion(options.rendering, stateText, question, {
      words: words !== null,
      contextual: options.contextual,
      bothOrders: options.bothOrders,
    });
    for (const pass of plannedPasses(plan)) {
      const tokens = await passTokens(client, pass, tokensPerPass, signal);
      if (tokens > tokensPerPass) {
        throw refusal(id, `a pass of this question needs ${tokens} tokens; at most ${tokensPerPass} per pass`);
      }
    }
    if (plan.finalPassBound !== null && plan.finalPassBound > tokensPerPass) {
      throw refusal(
        id,
        `the final pass of this choice may need up to ${plan.finalPassBound} tokens (bounded by its UTF-8 bytes); ` +
          `at most ${tokensPerPass} per pass: shorten the option descriptions`,
      );
    }
    questions.push({ id, question, plan, words });
  }
  return { stateText, questions };
}

/**
 * The pass's tokens: its byte bound when that is within the limit, otherwise the exact count from
 * the runtime's tokenizer, segment by segment as the runtime evaluates it, plus the
 * beginning-of-sequence token.
 */
async function passTokens(client: RuntimeClient, pass: Pass, limit: number, signal?: AbortSignal): Promise<number> {
  const bound = passTokenBound(pass);
  if (bound <= limit) return bound;
  let tokens = 1;
  for (const segment of pass.segments) {
    tokens += (await client.tokenize({ text: segment.text, special: segment.special }, signal)).tokens.length;
  }
  return tokens;
}

function refusal(questionId: string, problem: string): ServiceError {
  return new ServiceError("invalid_request", `${formatPath(["questions", questionId])}: ${problem}`);
}
