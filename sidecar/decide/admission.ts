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
import type { TokenizeResponse, TokenizeText } from "../../server-shared/runtime-protocol.ts";
import { asText, FIXED_FORMS, passTokenBound, plannedPasses, planQuestion, wordCandidates, type Pass, type QuestionPlan, type Rendering } from "./render.ts";
import { checkFixedForms, firstToken, knownWord, labelCache, learnWord, wordLabels, type FirstToken, type ResolvedLabels } from "./labels.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import { RuntimeError, type RuntimeClient } from "../runtime/client.ts";
import { verifiedClient, type RuntimeIdentity } from "./identity.ts";

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
  /** The fixed label forms on this runtime. */
  fixed: ResolvedLabels;
}

export interface AdmissionOptions {
  rendering: Rendering;
  /** Plan each single-pass question's content-free pass too. */
  contextual: boolean;
  /** Plan a small choice's reading in reverse order too. */
  bothOrders: boolean;
}

/**
 * Plans every question and checks the per-pass limit. A tokenize call to the runtime is made only
 * for what is not known yet: the fixed label forms and the per-pass limit the first time a
 * fingerprint is seen, option names or level texts not seen before, and the exact count of a pass
 * whose byte bound is over the limit. A known question on a known runtime makes no call (so the
 * runtime waits for nothing between a batch's records); the runtime's identity is then checked on
 * every pass's stamp. Throws IdentityMismatchError (503) when a stamp names another release,
 * ServiceError("invalid_request") when a pass is over the limit.
 */
export async function admit(runtimeClient: RuntimeClient, runtime: RuntimeIdentity, request: Decision, options: AdmissionOptions, signal?: AbortSignal): Promise<Admission> {
  const client = verifiedClient(runtimeClient, runtime);
  const stateText = asText(request.state);
  const cached = labelCache.get(runtime.fingerprint);
  const candidates = new Map([...request.questions].map(([id, question]) => [id, wordCandidates(options.rendering, question)]));
  const unknown = [...new Set([...candidates.values()].flatMap((words) => words ?? []))].filter((word) => knownWord(runtime.fingerprint, word) === undefined);
  // What this request learned, kept for it even if the bounded cache drops some of it meanwhile.
  const learned = new Map<string, FirstToken>();
  let kept = cached;
  if (!kept || unknown.length > 0) {
    const labelTexts = [...(cached ? [] : FIXED_FORMS), ...unknown];
    const labels = await tokenize(client, labelTexts.map((text) => ({ text, special: false })), signal);
    kept = { fixed: cached?.fixed ?? checkFixedForms(labels.results), tokensPerPass: Math.min(LIMITS.tokensPerPass, labels.max_tokens_per_pass) };
    labelCache.set(runtime.fingerprint, kept);
    unknown.forEach((word, i) => {
      const first = firstToken(labels.results[labelTexts.length - unknown.length + i]!);
      learned.set(word, first);
      learnWord(runtime.fingerprint, word, first);
    });
  }
  // With nothing to learn there is no call: the runtime's identity is checked on every pass's stamp.
  const { fixed, tokensPerPass } = kept;
  const known = (word: string) => learned.get(word) ?? knownWord(runtime.fingerprint, word)!;

  const questions: AdmittedQuestion[] = [];
  for (const [id, question] of request.questions) {
    const wordsOf = candidates.get(id);
    const words = wordsOf ? wordLabels(wordsOf, known) : null;
    const plan = planQuestion(options.rendering, stateText, question, { words: words !== null, contextual: options.contextual, bothOrders: options.bothOrders });
    questions.push({ id, question, plan, words });
  }

  const exact = await exactCounts(client, questions, tokensPerPass, signal);
  for (const { id, plan } of questions) {
    for (const pass of plannedPasses(plan)) {
      const tokens = exact.get(pass) ?? passTokenBound(pass);
      if (tokens > tokensPerPass) throw refusal(id, `a pass of this question needs ${tokens} tokens; at most ${tokensPerPass} per pass`);
    }
    if (plan.finalPassBound !== null && plan.finalPassBound > tokensPerPass) {
      throw refusal(
        id,
        `the final pass of this choice may need up to ${plan.finalPassBound} tokens (bounded by its UTF-8 bytes); ` +
          `at most ${tokensPerPass} per pass: shorten the option descriptions`,
      );
    }
  }
  return { stateText, questions, fixed };
}

/**
 * The exact token count of every planned pass whose byte bound is over the limit, from one tokenize
 * call over their distinct segments (the state is one segment shared by many passes), segment by
 * segment as the runtime evaluates it, plus the beginning-of-sequence token.
 */
async function exactCounts(client: RuntimeClient, questions: AdmittedQuestion[], limit: number, signal?: AbortSignal): Promise<Map<Pass, number>> {
  const long = questions.flatMap(({ plan }) => plannedPasses(plan)).filter((pass) => passTokenBound(pass) > limit);
  const counts = new Map<Pass, number>();
  if (long.length === 0) return counts;
  const key = (s: TokenizeText) => `${s.special ? 1 : 0}${s.text}`;
  const distinct = new Map(long.flatMap((pass) => pass.segments.map((s) => [key(s), { text: s.text, special: s.special }] as const)));
  const texts = [...distinct.values()];
  const { results } = await tokenize(client, texts, signal);
  const lengths = new Map(texts.map((text, i) => [key(text), results[i]!.tokens.length]));
  for (const pass of long) counts.set(pass, 1 + pass.segments.reduce((sum, s) => sum + lengths.get(key(s))!, 0));
  return counts;
}

/** A tokenize call with one result per text. */
async function tokenize(client: RuntimeClient, texts: TokenizeText[], signal?: AbortSignal): Promise<TokenizeResponse> {
  const response = await client.tokenize({ texts }, signal);
  if (response.results.length !== texts.length) {
    throw new RuntimeError(`runtime tokenized ${response.results.length} of ${texts.length} texts`, 200, "malformed");
  }
  return response;
}

function refusal(questionId: string, problem: string): ServiceError {
  return new ServiceError("invalid_request", `${formatPath(["questions", questionId])}: ${problem}`);
}
