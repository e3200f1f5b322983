/**
 * The rendering keeps to the template-independent budget of contract/budget.ts: whatever the content,
 * every pass it renders (chunks and every possible final pass included) is within `passBound` of the
 * content it offers, and a question's passes together are within `questionTokenBound`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CONTENT_FREE_STATE_MAX_BYTES, contentBytes, itemBytes, passBound, questionTokenBound } from "../../contract/budget.ts";
import { Question, type ChoiceQuestion } from "../../contract/decision.ts";
import { LIMITS } from "../../contract/limits.ts";
import { SERVED_STEPS } from "./steps.ts";
import {
  asText,
  choiceChunks,
  CHAT_RENDERING,
  BOTH_ORDERS_MAX_OPTIONS,
  CONTENT_FREE_STATE,
  passTokenBound,
  plannedPasses,
  planQuestion,
  renderChoice,
  OPTIONS_PER_PASS,
  SERVED_RENDERING,
  utf8Bytes,
} from "./render.ts";

/** Text with the characters that cost the most bytes or escape differently: multi-byte, quotes, markers. */
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.constantFrom("", "<end_of_turn>", '"quoted"\n\\', "日本語テキスト", "🙂🙃"),
);
const json = fc.oneof(text, fc.jsonValue({ maxDepth: 3 }).filter((v) => v !== null));
const nullable = fc.option(json, { nil: null });
const structured = fc.jsonValue({ maxDepth: 3 }).filter((v): v is object => typeof v === "object" && v !== null);
const instructions = fc.option(fc.oneof(text, structured), { nil: undefined });

const noul = fc.record({
  type: fc.constant("noul" as const),
  instructions,
  criteria: fc.option(fc.record({ true: nullable, false: nullable }), { nil: undefined }),
});
const score = fc.record({
  type: fc.constant("score" as const),
  instructions,
  criteria: fc.array(json, { minLength: LIMITS.scoreLevels.min, maxLength: LIMITS.scoreLevels.max }),
});
const choice = fc.record({
  type: fc.constant("choice" as const),
  instructions,
  criteria: fc
    .uniqueArray(fc.tuple(fc.string({ minLength: 1, maxLength: 30 }), nullable), {
      minLength: LIMITS.choiceOptions.min,
      maxLength: LIMITS.choiceOptions.max,
      selector: ([name]) => name,
    })
    .map((entries) => Object.fromEntries(entries)),
});
const question: fc.Arbitrary<Question> = fc.oneof(noul, score, choice).map((q) => Question.parse(q));
const choiceQuestion = choice.map((q) => Question.parse(q) as ChoiceQuestion);
const state = fc.oneof(text, fc.jsonValue({ maxDepth: 3 }));
/** Every rendering the sidecar can run (served and measured), read by words or not. */
const rendering = fc.constantFrom(SERVED_RENDERING, CHAT_RENDERING);
const words = fc.boolean();

describe("rendering within the contract's budget", () => {
  it("the content-free state is within the budget's allowance for it", () => {
    expect(utf8Bytes(CONTENT_FREE_STATE)).toBeLessThanOrEqual(CONTENT_FREE_STATE_MAX_BYTES);
  });

  it("every planned pass is within passBound of the content it offers", () => {
    fc.assert(
      fc.property(rendering, words, state, question, (r, w, s, q) => {
        const stateText = asText(s);
        const plan = planQuestion(r, stateText, q, { words: w, contextual: true, bothOrders: true });
        const stateBytes = contentBytes(s);
        const instructions = contentBytes(q.instructions);
        if (q.type !== "choice" || q.criteria.size <= OPTIONS_PER_PASS) {
          const orders = q.type === "choice" && q.criteria.size <= BOTH_ORDERS_MAX_OPTIONS ? 2 : 1;
          expect(plan.readings).toHaveLength(orders);
          for (const { pass, contentFree } of plan.readings) {
            expect(passTokenBound(pass)).toBeLessThanOrEqual(passBound(stateBytes, instructions, itemBytes(q)));
            expect(passTokenBound(contentFree!)).toBeLessThanOrEqual(passBound(CONTENT_FREE_STATE_MAX_BYTES, instructions, itemBytes(q)));
          }
          return;
        }
        expect(plan.readings).toEqual([]);
        const names = [...q.criteria.keys()];
        const bytes = new Map(names.map((name, i) => [name, itemBytes(q)[i]!]));
        const chunks = choiceChunks(names);
        chunks.forEach((chunk, i) => {
          expect(chunk.length).toBeLessThanOrEqual(OPTIONS_PER_PASS);
          expect(passTokenBound(plan.chunks[i]!)).toBeLessThanOrEqual(passBound(stateBytes, instructions, chunk.map((n) => bytes.get(n)!)));
        });
      }),
      { numRuns: 300 },
    );
  });

  it("a question's passes, its worst final pass included, are within questionTokenBound", () => {
    fc.assert(
      fc.property(rendering, words, state, question, (r, w, s, q) => {
        // The served plan (a small choice read in both option orders, reserved by the edge as such), and every plan beside it.
        const plans = [SERVED_STEPS, { contextual: true, bothOrders: true }, { contextual: true, bothOrders: false }, { contextual: false, bothOrders: false }].map((steps) =>
          planQuestion(r, asText(s), q, { words: w, contextual: steps.contextual, bothOrders: steps.bothOrders }),
        );
        for (const plan of plans) {
          const total = plannedPasses(plan).reduce((sum, p) => sum + passTokenBound(p), 0) + (plan.finalPassBound ?? 0);
          expect(total).toBeLessThanOrEqual(questionTokenBound(contentBytes(s), q));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("any final pass over any finalists is within the bound of the largest options", () => {
    fc.assert(
      fc.property(rendering, state, choiceQuestion, fc.nat(), (r, s, q, seed) => {
        const names = [...q.criteria.keys()];
        // Any subset of at most OPTIONS_PER_PASS options, in key order, as selectFinalists returns.
        const finalists = names.filter((_, i) => (seed >> i % 31) & 1).slice(0, OPTIONS_PER_PASS);
        if (finalists.length < 2) return;
        const largest = [...itemBytes(q)].sort((a, b) => b - a).slice(0, OPTIONS_PER_PASS);
        const rendered = renderChoice(r, asText(s), q, finalists);
        expect(passTokenBound(rendered)).toBeLessThanOrEqual(passBound(contentBytes(s), contentBytes(q.instructions), largest));
      }),
      { numRuns: 300 },
    );
  });
});
