/**
 * The readout as a specification (runs in tests only): hand-computed values for each answer type,
 * then properties that hold for any log-probabilities the runtime can send.
 */
import fc from "fast-check";
import { stringifyJson } from "../../contract/json.ts";
import { describe, expect, it } from "vitest";
import { Answer } from "../../contract/decision.ts";
import { FINALIST_MASS, OPTIONS_PER_PASS } from "./render.ts";
import { LOGPROB_FLOOR } from "../../server-shared/runtime-protocol.ts";
import {
  CONFIDENCE_DEFINITIONS,
  calibratedAnswer,
  choiceAnswer,
  contextualProbabilities,
  labelLogprobs,
  optionMass,
  chunkProbabilities,
  mergeChunks,
  noulAnswer,
  probabilities,
  scoreAnswer,
  selectFinalists,
} from "./readout.ts";

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
const names = (n: number) => Array.from({ length: n }, (_, i) => `option ${i}`);

describe("probabilities", () => {
  it("is the softmax of the log-probabilities", () => {
    const p = probabilities([Math.log(0.2), Math.log(0.05)]);
    expect(p[0]).toBeCloseTo(0.8, 15);
    expect(p[1]).toBeCloseTo(0.2, 15);
  });

  it("renormalises labels that hold little of the vocabulary's mass", () => {
    // 0.006 and 0.002 of the full vocabulary: 3 to 1 between the labels.
    expect(probabilities([Math.log(0.006), Math.log(0.002)])).toEqual([expect.closeTo(0.75, 14), expect.closeTo(0.25, 14)]);
  });

  it("gives equal values equal probabilities, at the float32 floor too", () => {
    expect(probabilities([LOGPROB_FLOOR, LOGPROB_FLOOR, LOGPROB_FLOOR, LOGPROB_FLOOR])).toEqual([0.25, 0.25, 0.25, 0.25]);
    expect(probabilities([-3, -3])).toEqual([0.5, 0.5]);
  });

  it("does not underflow to 0/0 when every label is far below the rest of the vocabulary", () => {
    const p = probabilities([-1000, -1001]);
    expect(p[0]).toBeCloseTo(1 / (1 + Math.exp(-1)), 14);
  });

  it("reads -Infinity as probability 0, and all -Infinity as no information", () => {
    expect(probabilities([-1, -Infinity])).toEqual([1, 0]);
    expect(probabilities([-Infinity, -Infinity])).toEqual([0.5, 0.5]);
  });

  it("refuses what no runtime may send: NaN, +Infinity, nothing", () => {
    expect(() => probabilities([0, Number.NaN])).toThrow(RangeError);
    expect(() => probabilities([0, Infinity])).toThrow(RangeError);
    expect(() => probabilities([])).toThrow(RangeError);
  });
});

describe("noulAnswer", () => {
  it("is p(Yes), with no confidence field", () => {
    const answer = noulAnswer(probabilities([Math.log(0.3), Math.log(0.1)]));
    expect(answer).toEqual({ type: "noul", noul: expect.closeTo(0.75, 14) });
    expect(Object.keys(answer)).toEqual(["type", "noul"]);
  });
});

describe("choiceAnswer", () => {
  it("picks the argmax and reports every option", () => {
    const answer = choiceAnswer(["billing", "bug", "other"], [0.2, 0.7, 0.1]);
    expect(answer).toEqual({
      type: "choice",
      choice: "bug",
      probabilities: new Map([
        ["billing", 0.2],
        ["bug", 0.7],
        ["other", 0.1],
      ]),
      // (3 · 0.7 − 1) / 2
      confidence: expect.closeTo(0.55, 14),
    });
    expect(Answer.parse(answer)).toEqual(answer);
  });

  it("breaks a tie by the criteria's key order: the first option wins", () => {
    expect(choiceAnswer(["b", "a", "c"], [0.1, 0.45, 0.45]).choice).toBe("a");
    expect(choiceAnswer(["z", "y"], [0.5, 0.5]).choice).toBe("z");
  });

  it("has confidence 0 for a uniform distribution and 1 for a one-hot", () => {
    expect(choiceAnswer(names(4), [0.25, 0.25, 0.25, 0.25]).confidence).toBe(0);
    expect(choiceAnswer(names(4), [0, 0, 1, 0]).confidence).toBe(1);
  });

  it("keeps options named __proto__ and integer-like names as ordinary keys, in the criteria's order", () => {
    const answer = choiceAnswer(["__proto__", "x", "10", "2"], [0.6, 0.1, 0.2, 0.1]);
    expect([...answer.probabilities.keys()]).toEqual(["__proto__", "x", "10", "2"]);
    expect(stringifyJson(answer.probabilities)).toBe('{"__proto__":0.6,"x":0.1,"10":0.2,"2":0.1}');
  });
});

describe("scoreAnswer", () => {
  it("is the expected 0-based level, keyed by level strings, with the legend as given", () => {
    const legend = ["none", { label: "some", examples: ["a typo", null] }, ["severe", 3]];
    const answer = scoreAnswer(legend, [0.5, 0.25, 0.25]);
    expect(answer.score).toBeCloseTo(0.75, 15);
    expect(Object.fromEntries(answer.probabilities)).toEqual({ "0": 0.5, "1": 0.25, "2": 0.25 });
    expect(Object.fromEntries(answer.legend)).toEqual({ "0": "none", "1": { label: "some", examples: ["a typo", null] }, "2": ["severe", 3] });
    // mean 0.75, variance 0.5·0.5625 + 0.25·0.0625 + 0.25·1.5625 = 0.6875; σ_max = 1
    expect(answer.confidence).toBeCloseTo(1 - Math.sqrt(0.6875), 14);
    expect(Answer.parse(answer)).toEqual(answer);
  });

  it("scores a one-hot on level k as k, with confidence 1", () => {
    for (let k = 0; k < 5; k++) {
      const p = [0, 0, 0, 0, 0];
      p[k] = 1;
      expect(scoreAnswer(["a", "b", "c", "d", "e"], p)).toMatchObject({ score: k, confidence: 1 });
    }
  });

  it("has confidence 0 when the mass is split between the two ends, and more for neighbours", () => {
    const legend = ["0", "1", "2", "3", "4"];
    expect(scoreAnswer(legend, [0.5, 0, 0, 0, 0.5]).confidence).toBe(0);
    expect(scoreAnswer(legend, [0, 0.5, 0.5, 0, 0]).confidence).toBeCloseTo(1 - 0.5 / 2, 14);
    // A uniform spread over n levels has σ = sqrt((n² − 1) / 12): confidence 1 − sqrt((n + 1) / (3(n − 1))).
    expect(scoreAnswer(legend, [0.2, 0.2, 0.2, 0.2, 0.2]).confidence).toBeCloseTo(1 - Math.sqrt(6 / 12), 14);
    expect(scoreAnswer(["no", "yes"], [0.5, 0.5]).confidence).toBe(0);
  });
});

describe("a choice read in chunks", () => {
  it("normalises every chunk's values together, not chunk by chunk", () => {
    const p = chunkProbabilities([[Math.log(0.4), Math.log(0.1)], [Math.log(0.05)]]);
    expect(p).toEqual([expect.closeTo(0.4 / 0.55, 14), expect.closeTo(0.1 / 0.55, 14), expect.closeTo(0.05 / 0.55, 14)]);
  });

  it("takes the smallest top set holding FINALIST_MASS, in key order", () => {
    expect(FINALIST_MASS).toBe(0.99);
    expect(selectFinalists(["a", "b", "c", "d"], [0.0025, 0.62, 0.0025, 0.375])).toEqual(["b", "d"]);
    expect(selectFinalists(["a", "b", "c", "d"], [0.004, 0.6, 0.011, 0.385])).toEqual(["b", "c", "d"]);
    expect(selectFinalists(["a", "b", "c"], [0.995, 0.004, 0.001])).toEqual(["a"]);
  });

  it("breaks ties at the cut by key order", () => {
    expect(selectFinalists(["a", "b", "c", "d"], [0.2, 0.3, 0.3, 0.2])).toEqual(["a", "b", "c", "d"]);
    expect(selectFinalists(["a", "b", "c", "d", "e"], [0.005, 0.99 - 0.005, 0.0025, 0.005, 0.0025])).toEqual(["a", "b"]);
  });

  it("offers at most OPTIONS_PER_PASS finalists however flat the distribution", () => {
    const n = 255;
    const finalists = selectFinalists(names(n), Array<number>(n).fill(1 / n));
    expect(finalists).toEqual(names(OPTIONS_PER_PASS));
  });

  it("shares the finalists' mass out by the final pass, and keeps everyone else's p_chunk", () => {
    const all = ["a", "b", "c", "d"];
    const pChunk = [0.3, 0.3, 0.39, 0.01];
    const finalists = selectFinalists(all, pChunk);
    expect(finalists).toEqual(["a", "b", "c"]);
    // The final pass says a : b : c = 1 : 2 : 1 when they are side by side.
    const pFinal = mergeChunks(all, pChunk, finalists, [Math.log(0.1), Math.log(0.2), Math.log(0.1)]);
    expect(pFinal).toEqual([expect.closeTo(0.99 / 4, 14), expect.closeTo(0.99 / 2, 14), expect.closeTo(0.99 / 4, 14), expect.closeTo(0.01, 14)]);
    expect(choiceAnswer(all, pFinal).choice).toBe("b");
  });

  it("needs no final pass for a single finalist", () => {
    const pChunk = [0.995, 0.003, 0.002];
    expect(mergeChunks(["a", "b", "c"], pChunk, ["a"], null)).toEqual(pChunk);
    expect(() => mergeChunks(["a", "b", "c"], pChunk, ["a", "b"], null)).toThrow(RangeError);
  });
});

describe("confidence definitions", () => {
  it("are documented for every answer type", () => {
    expect(Object.keys(CONFIDENCE_DEFINITIONS)).toEqual(["noul", "choice", "score"]);
    expect(CONFIDENCE_DEFINITIONS.choice).toContain("(n·p_max − 1) / (n − 1)");
    expect(CONFIDENCE_DEFINITIONS.score).toContain("σ_max = (n − 1) / 2");
  });
});

// --- Properties ----------------------------------------------------------------------------------

/** Log-probabilities a runtime can send, and some worse: the float32 floor, zero, ties, spreads of 1e300. */
const logprob = fc.oneof(
  fc.double({ min: LOGPROB_FLOOR, max: 0, noNaN: true }),
  fc.constantFrom(LOGPROB_FLOOR, 0, -1, -Number.MIN_VALUE),
  fc.double({ min: -1e300, max: 0, noNaN: true }),
  fc.constant(-Infinity),
);
const vector = (min: number, max: number) =>
  fc.oneof(
    fc.array(logprob, { minLength: min, maxLength: max }),
    // All equal, possibly at the floor.
    fc.tuple(logprob, fc.integer({ min, max })).map(([lp, n]) => Array<number>(n).fill(lp)),
  );

function expectDistribution(p: readonly number[]) {
  for (const pi of p) {
    expect(Number.isFinite(pi)).toBe(true);
    expect(pi).toBeGreaterThanOrEqual(0);
    expect(pi).toBeLessThanOrEqual(1);
  }
  expect(Math.abs(sum(p) - 1)).toBeLessThanOrEqual(1e-9);
}

describe("properties", () => {
  it("probabilities: finite, in [0, 1], summing to 1", () => {
    fc.assert(
      fc.property(vector(1, 300), (lps) => {
        expectDistribution(probabilities(lps));
      }),
    );
  });

  it("choice: a well-formed answer whose choice has the largest probability", () => {
    fc.assert(
      fc.property(vector(2, 26), (lps) => {
        const p = probabilities(lps);
        const answer = choiceAnswer(names(p.length), p);
        expect(Answer.safeParse(answer).success).toBe(true);
        expect(answer.confidence).toBeGreaterThanOrEqual(0);
        expect(answer.confidence).toBeLessThanOrEqual(1);
        expect(answer.probabilities.get(answer.choice)).toBe(Math.max(...p));
      }),
    );
  });

  it("score: within [0, n − 1], confidence within [0, 1]", () => {
    fc.assert(
      fc.property(vector(2, 10), (lps) => {
        const p = probabilities(lps);
        const answer = scoreAnswer(p.map((_, i) => ({ level: i })), p);
        expect(Answer.safeParse(answer).success).toBe(true);
        expect(answer.score).toBeGreaterThanOrEqual(0);
        expect(answer.score).toBeLessThanOrEqual(p.length - 1);
        expect(answer.confidence).toBeGreaterThanOrEqual(0);
        expect(answer.confidence).toBeLessThanOrEqual(1);
        expectDistribution([...answer.probabilities.values()]);
      }),
    );
  });

  it("noul: p(Yes) in [0, 1]", () => {
    fc.assert(
      fc.property(vector(2, 2), (lps) => {
        expect(Answer.safeParse(noulAnswer(probabilities(lps))).success).toBe(true);
      }),
    );
  });

  it("chunk merge: sums to 1 over all options, at most OPTIONS_PER_PASS finalists, p_chunk kept for the rest", () => {
    const chunked = fc.integer({ min: OPTIONS_PER_PASS + 1, max: 255 }).chain((n) =>
      fc.record({
        chunks: fc.array(logprob, { minLength: n, maxLength: n }),
        final: fc.array(logprob, { minLength: OPTIONS_PER_PASS, maxLength: OPTIONS_PER_PASS }),
      }),
    );
    fc.assert(
      fc.property(chunked, ({ chunks, final }) => {
        const all = names(chunks.length);
        const pChunk = chunkProbabilities([chunks.slice(0, 100), chunks.slice(100)]);
        const finalists = selectFinalists(all, pChunk);
        expect(finalists.length).toBeGreaterThanOrEqual(1);
        expect(finalists.length).toBeLessThanOrEqual(OPTIONS_PER_PASS);
        expect(finalists).toEqual(all.filter((name) => finalists.includes(name)));
        const pFinal = mergeChunks(all, pChunk, finalists, finalists.length > 1 ? final.slice(0, finalists.length) : null);
        expectDistribution(pFinal);
        all.forEach((name, i) => {
          if (!finalists.includes(name)) expect(Math.abs(pFinal[i]! - pChunk[i]!)).toBeLessThanOrEqual(1e-12);
        });
        // The finalists keep their joint share of the mass.
        const share = (p: readonly number[]) => sum(all.map((name, i) => (finalists.includes(name) ? p[i]! : 0)));
        expect(Math.abs(share(pFinal) - share(pChunk))).toBeLessThanOrEqual(1e-9);
      }),
    );
  });

  it("finalists: the smallest top set holding FINALIST_MASS unless capped", () => {
    fc.assert(
      fc.property(fc.array(logprob, { minLength: 2, maxLength: 255 }), (lps) => {
        const p = probabilities(lps);
        const all = names(p.length);
        const finalists = selectFinalists(all, p);
        const mass = sum(finalists.map((name) => p[all.indexOf(name)]!));
        if (finalists.length < OPTIONS_PER_PASS) expect(mass).toBeGreaterThanOrEqual(FINALIST_MASS);
        // Smallest: without its least probable member the set holds less than FINALIST_MASS.
        const least = Math.min(...finalists.map((name) => p[all.indexOf(name)]!));
        if (finalists.length > 1) expect(mass - least).toBeLessThan(FINALIST_MASS + 1e-12);
        // Top: no outsider is more probable than any finalist.
        const outsiders = all.filter((name) => !finalists.includes(name)).map((name) => p[all.indexOf(name)]!);
        if (outsiders.length > 0) expect(Math.max(...outsiders)).toBeLessThanOrEqual(least);
      }),
    );
  });
});

describe("label forms, option mass and contextual calibration", () => {
  it("sums a label's forms: log(0.2 + 0.1) for Yes, log(0.05) for No", () => {
    const lp = labelLogprobs([Math.log(0.2), Math.log(0.1), Math.log(0.05)], [[0, 1], [2]]);
    expect(lp[0]).toBeCloseTo(Math.log(0.3), 12);
    expect(lp[1]).toBeCloseTo(Math.log(0.05), 12);
    expect(optionMass(lp)).toBeCloseTo(0.35, 12);
    expect(() => labelLogprobs([0, 0, 0], [[0, 1]])).toThrow(RangeError);
  });

  it("keeps a sum of floored forms finite", () => {
    const lp = labelLogprobs([LOGPROB_FLOOR, LOGPROB_FLOOR], [[0, 1]]);
    expect(Number.isFinite(lp[0])).toBe(true);
  });

  it("divides by the content-free distribution: a prior of 0.8 towards Yes turns 0.8 into an even answer", () => {
    expect(contextualProbabilities([Math.log(0.8), Math.log(0.2)], [Math.log(0.8), Math.log(0.2)])).toEqual([0.5, 0.5]);
    const p = contextualProbabilities([Math.log(0.6), Math.log(0.4)], [Math.log(0.8), Math.log(0.2)]);
    // 0.6/0.8 : 0.4/0.2 = 0.75 : 2
    expect(p[0]).toBeCloseTo(0.75 / 2.75, 12);
  });

  it("returns a distribution for any pair of runtime values", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(logprob, logprob), { minLength: 2, maxLength: 26 }), (pairs) => {
        expectDistribution(contextualProbabilities(pairs.map(([a]) => a), pairs.map(([, b]) => b)));
      }),
    );
  });
});

describe("calibratedAnswer", () => {
  const none = { noul: null, choice: null, score: null };

  it("leaves an answer alone where the calibration has nothing for its type", () => {
    const answer = { ...noulAnswer([0.7, 0.3]), option_mass: 0.4 };
    expect(calibratedAnswer(answer, none)).toBe(answer);
  });

  it("applies Platt scaling to p(yes): slope 1, bias -logit(0.7) turns 0.7 into 0.5", () => {
    const answer = calibratedAnswer(noulAnswer([0.7, 0.3]), { ...none, noul: { slope: 1, bias: -Math.log(0.7 / 0.3) } });
    expect(answer).toEqual({ type: "noul", noul: expect.closeTo(0.5, 12) });
  });

  it("reads a choice again under a temperature, keeping its option order and mass", () => {
    const raw = { ...choiceAnswer(["b", "a"], [0.8, 0.2]), option_mass: 0.9 };
    const cooled = calibratedAnswer(raw, { ...none, choice: { temperature: 2 } });
    if (cooled.type !== "choice") throw new Error("not a choice");
    expect([...cooled.probabilities.keys()]).toEqual(["b", "a"]);
    // p^(1/2) normalised: 2 / 3 and 1 / 3.
    expect(cooled.probabilities.get("b")).toBeCloseTo(2 / 3, 12);
    expect(cooled.choice).toBe("b");
    expect(cooled.confidence).toBeCloseTo(1 / 3, 12);
    expect(cooled.option_mass).toBe(0.9);
  });

  it("reads a score again under a temperature, keeping its legend", () => {
    const raw = scoreAnswer(["low", { level: "high" }], [0.25, 0.75]);
    const sharp = calibratedAnswer(raw, { ...none, score: { temperature: 0.5 } });
    if (sharp.type !== "score") throw new Error("not a score");
    expect(sharp.score).toBeCloseTo(0.9, 12);
    expect([...sharp.legend.values()]).toEqual(["low", { level: "high" }]);
  });
});
