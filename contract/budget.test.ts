import { describe, expect, it } from "vitest";
import { budgetViolation, CONTENT_FREE_STATE_MAX_BYTES, contentBytes, ITEM_ALLOWANCE_BYTES, PASS_ALLOWANCE_BYTES, passBound, questionTokenBound, requestTokenBound } from "./budget.ts";
import { Question, Questions } from "./decision.ts";
import { LIMITS } from "./limits.ts";

describe("contentBytes", () => {
  it("counts text as UTF-8 and anything else as compact JSON", () => {
    expect(contentBytes("abc")).toBe(3);
    expect(contentBytes("日本")).toBe(6);
    expect(contentBytes({ a: [1, "x"] })).toBe(JSON.stringify({ a: [1, "x"] }).length);
    expect(contentBytes(null)).toBe(0);
    expect(contentBytes(undefined)).toBe(0);
  });
});

describe("requestTokenBound", () => {
  it("is two passes' allowance plus the content for a noul: about the state, and about the content-free state", () => {
    const bound = requestTokenBound({ state: "charged twice", questions: Questions.parse({ q: { type: "noul", instructions: "Money?" } }) });
    expect(bound).toBe(1 + PASS_ALLOWANCE_BYTES + 13 + 6 + (1 + PASS_ALLOWANCE_BYTES + CONTENT_FREE_STATE_MAX_BYTES + 6));
  });

  it("counts both option orders of a small choice, and one reading of a larger single-pass choice", () => {
    const choice = (n: number) => Question.parse({ type: "choice", criteria: Object.fromEntries(Array.from({ length: n }, (_, i) => [`o${i}`, null])) });
    const oneReading = (n: number) => {
      const items = Array.from({ length: n }, (_, i) => contentBytes(`o${i}`));
      return passBound(7, 0, items) + passBound(CONTENT_FREE_STATE_MAX_BYTES, 0, items);
    };
    const small = LIMITS.choiceBothOrdersMaxOptions;
    expect(questionTokenBound(7, choice(2))).toBe(2 * oneReading(2));
    expect(questionTokenBound(7, choice(small))).toBe(2 * oneReading(small));
    expect(questionTokenBound(7, choice(small + 1))).toBe(oneReading(small + 1));
    expect(questionTokenBound(7, choice(LIMITS.choiceOptionsPerPass))).toBe(oneReading(LIMITS.choiceOptionsPerPass));
  });

  it("counts each state once per pass and each option once, plus the worst final pass, for a chunked choice", () => {
    const n = 60;
    const criteria = Object.fromEntries(Array.from({ length: n }, (_, i) => [`o${i}`, i === 0 ? "x".repeat(100) : null]));
    const q = Question.parse({ type: "choice", criteria });
    const chunks = Math.ceil(n / LIMITS.choiceOptionsPerPass);
    const itemTotal = Object.entries(criteria).reduce((sum, [name, d]) => sum + ITEM_ALLOWANCE_BYTES + contentBytes(name) + contentBytes(d), 0);
    const largest = Object.entries(criteria)
      .map(([name, d]) => contentBytes(name) + contentBytes(d))
      .sort((a, b) => b - a)
      .slice(0, LIMITS.choiceOptionsPerPass);
    expect(questionTokenBound(5, q)).toBe(chunks * passBound(5, 0, []) + itemTotal + passBound(5, 0, largest));
  });
});

describe("budgetViolation", () => {
  it("is null within the request limit and names the limit beyond it", () => {
    expect(budgetViolation({ state: "s", questions: Questions.parse({ q: { type: "noul" } }) })).toBeNull();
    const many = Questions.parse(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`q${i}`, { type: "noul" }])));
    expect(budgetViolation({ state: "y".repeat(2000), questions: many })).toMatch(
      /^questions: this request may need \d+ input tokens; at most 65536 per request/,
    );
  });
});
