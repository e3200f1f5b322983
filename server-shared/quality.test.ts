/**
 * The quality figures as a specification (runs in tests only): hand-worked values for each figure,
 * AUROC against its pairwise definition on random data, and the SVG's safety with hostile text.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { auroc, binaryBrier, brier, ece, eceOfBins, escapeXml, reliabilityBins, reliabilitySvg } from "./quality.ts";
import { seededRandom } from "../test/support/random.ts";

/** The definition AUROC stands for, O(n²): P(score+ > score−) + P(score+ = score−)/2 over all pairs. */
function pairwiseAuroc(scores: readonly number[], positives: readonly boolean[]): number | null {
  let wins = 0;
  let pairs = 0;
  scores.forEach((s, i) => {
    if (!positives[i]) return;
    scores.forEach((t, j) => {
      if (positives[j]) return;
      pairs++;
      wins += s > t ? 1 : s === t ? 0.5 : 0;
    });
  });
  return pairs === 0 ? null : wins / pairs;
}


describe("auroc", () => {
  it("is 1 for a perfect ranking, 0 for a reversed one, 0.5 when every score ties", () => {
    expect(auroc([0.9, 0.8, 0.2, 0.1], [true, true, false, false])).toBe(1);
    expect(auroc([0.1, 0.2, 0.8, 0.9], [true, true, false, false])).toBe(0);
    expect(auroc([0.5, 0.5, 0.5, 0.5, 0.5], [true, false, true, false, false])).toBe(0.5);
  });

  it("counts a tie between a positive and a negative as half a win", () => {
    // Pairs (+, −): (0.8, 0.3) win, (0.8, 0.5) win, (0.5, 0.3) win, (0.5, 0.5) tie: 3.5 of 4.
    expect(auroc([0.8, 0.5, 0.5, 0.3], [true, true, false, false])).toBe(0.875);
  });

  it("is null when either class is empty", () => {
    expect(auroc([0.2, 0.9], [true, true])).toBeNull();
    expect(auroc([0.2, 0.9], [false, false])).toBeNull();
  });

  it("equals the pairwise definition on random data, ties included", () => {
    const score = fc.oneof(
      fc.integer({ min: 0, max: 4 }).map((i) => i / 4),
      fc.double({ min: 0, max: 1, noNaN: true }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(score, fc.boolean()), { minLength: 1, maxLength: 200 }), (items) => {
        const scores = items.map(([s]) => s);
        const labels = items.map(([, y]) => y);
        const fast = auroc(scores, labels);
        const slow = pairwiseAuroc(scores, labels);
        if (slow === null) expect(fast).toBeNull();
        else expect(fast).toBeCloseTo(slow, 12);
      }),
      { seed: 20240501, numRuns: 300 },
    );
  });

  it("ranks 100k items well under a second (sort-based, not pairwise)", () => {
    const random = seededRandom(7);
    const scores = Array.from({ length: 100_000 }, () => Math.round(random() * 1000) / 1000);
    const labels = scores.map((s) => random() < s);
    const started = performance.now();
    const area = auroc(scores, labels);
    expect(performance.now() - started).toBeLessThan(1000);
    // Scores that are the probability of a positive rank well: the area is far from chance.
    expect(area).toBeGreaterThan(0.75);
  });

  it("refuses empty, mismatched and out-of-range input", () => {
    expect(() => auroc([], [])).toThrow(RangeError);
    expect(() => auroc([0.1, 0.2], [true])).toThrow(RangeError);
    expect(() => auroc([0.1, 1.2], [true, false])).toThrow(RangeError);
    expect(() => auroc([Number.NaN, 0.2], [true, false])).toThrow(RangeError);
  });
});

describe("reliabilityBins", () => {
  it("returns every equal-width bin, empty ones with null figures", () => {
    const bins = reliabilityBins([0.05, 0.15, 0.17], [true, false, true], 4);
    expect(bins).toEqual([
      { lower: 0, upper: 0.25, count: 3, mean_confidence: expect.closeTo(0.37 / 3, 15), accuracy: 2 / 3 },
      { lower: 0.25, upper: 0.5, count: 0, mean_confidence: null, accuracy: null },
      { lower: 0.5, upper: 0.75, count: 0, mean_confidence: null, accuracy: null },
      { lower: 0.75, upper: 1, count: 0, mean_confidence: null, accuracy: null },
    ]);
  });

  it("puts a bin's lower edge into that bin, and a confidence of 1 into the last bin", () => {
    const bins = reliabilityBins([0, 0.5, 1], [false, true, true], 10);
    expect(bins.map((b) => b.count)).toEqual([1, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
  });

  it("refuses a bin count that is not a positive integer", () => {
    expect(() => reliabilityBins([0.5], [true], 0)).toThrow(RangeError);
    expect(() => reliabilityBins([0.5], [true], 2.5)).toThrow(RangeError);
  });
});

describe("ece", () => {
  it("is 0 when every bin's accuracy equals its mean confidence", () => {
    const confidences = [0.25, 0.25, 0.25, 0.25, 0.75, 0.75, 0.75, 0.75];
    const correct = [true, false, false, false, true, true, true, false];
    expect(ece(confidences, correct)).toBe(0);
  });

  it("weights each bin's gap by its share of the items (hand-worked)", () => {
    // Bin [0.1, 0.2): 2 items, confidence 0.15, accuracy 0.5, gap 0.35.
    // Bin [0.8, 0.9): 4 items, confidence 0.85, accuracy 0.75, gap 0.1.
    // ECE = 2/6 · 0.35 + 4/6 · 0.1 = 0.55 / 3.
    const confidences = [0.15, 0.15, 0.85, 0.85, 0.85, 0.85];
    const correct = [true, false, true, true, true, false];
    expect(ece(confidences, correct)).toBeCloseTo(0.55 / 3, 12);
  });

  it("is 1 for certain answers that are all wrong", () => {
    expect(ece([1, 1, 0], [false, false, true])).toBe(1);
  });

  it("is the figure of the reliability bins", () => {
    const random = seededRandom(11);
    const confidences = Array.from({ length: 1000 }, () => random());
    const correct = confidences.map((c) => random() < c * c);
    expect(ece(confidences, correct, 15)).toBe(eceOfBins(reliabilityBins(confidences, correct, 15)));
  });

  it("refuses empty, mismatched and out-of-range input", () => {
    expect(() => ece([], [])).toThrow(RangeError);
    expect(() => ece([0.5], [true, false])).toThrow(RangeError);
    expect(() => ece([-0.1], [true])).toThrow(RangeError);
  });
});

describe("brier", () => {
  it("is 0 for a certain correct answer and 2 for a certain wrong one", () => {
    expect(brier([[0, 1, 0]], [1])).toBe(0);
    expect(brier([[1, 0, 0]], [1])).toBe(2);
  });

  it("averages Σ (p_i − [i = truth])² over items (hand-worked)", () => {
    // Item 1: 0.3² + 0.3² = 0.18. Item 2: 0.5² + 0.5² + 0 = 0.5. Mean 0.34.
    expect(brier([[0.7, 0.3], [0.5, 0, 0.5]], [0, 2])).toBeCloseTo(0.34, 15);
  });

  it("scores a yes/no question passed as [p, 1 − p] twice the binary Brier score", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.boolean()), { minLength: 1, maxLength: 50 }), (items) => {
        const p = items.map(([pi]) => pi);
        const yes = items.map(([, y]) => y);
        const multi = brier(p.map((pi) => [pi, 1 - pi]), yes.map((y) => (y ? 0 : 1)));
        expect(multi).toBeCloseTo(2 * binaryBrier(p, yes), 12);
      }),
      { seed: 3, numRuns: 200 },
    );
  });

  it("refuses a true index that is not one of the item's labels", () => {
    expect(() => brier([[0.5, 0.5]], [2])).toThrow(RangeError);
    expect(() => brier([[0.5, 0.5]], [0.5])).toThrow(RangeError);
    expect(() => brier([[]], [0])).toThrow(RangeError);
    expect(() => brier([[0.5, 1.5]], [0])).toThrow(RangeError);
    expect(() => brier([], [])).toThrow(RangeError);
  });
});

describe("binaryBrier", () => {
  it("is 0 for a certain correct answer and 1 for a certain wrong one", () => {
    expect(binaryBrier([1, 0], [true, false])).toBe(0);
    expect(binaryBrier([0, 1], [true, false])).toBe(1);
  });

  it("is the mean of (p − y)² (hand-worked)", () => {
    // 0.3² and 0.4²: (0.09 + 0.16) / 2.
    expect(binaryBrier([0.7, 0.4], [true, false])).toBeCloseTo(0.125, 15);
  });

  it("refuses empty, mismatched and out-of-range input", () => {
    expect(() => binaryBrier([], [])).toThrow(RangeError);
    expect(() => binaryBrier([0.5], [])).toThrow(RangeError);
    expect(() => binaryBrier([2], [true])).toThrow(RangeError);
  });
});

/** Tags balance and nothing but the one root sits at the top level: enough of XML for a diagram. */
function wellFormedTags(svg: string): boolean {
  const stack: string[] = [];
  let roots = 0;
  for (const [, closing, name, , selfClosing] of svg.matchAll(/<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g)) {
    if (stack.length === 0 && !closing) roots++;
    if (closing) {
      if (stack.pop() !== name) return false;
    } else if (!selfClosing) stack.push(name!);
  }
  const outsideTags = svg.replace(/<[^>]*>/g, "");
  return stack.length === 0 && roots === 1 && !/[<>]/.test(outsideTags) && !/&(?!(amp|lt|gt|quot|apos);)/.test(outsideTags);
}

describe("reliabilitySvg", () => {
  const before = reliabilityBins([0.95, 0.95, 0.95, 0.95, 0.55, 0.55], [true, false, true, false, true, false]);
  const after = reliabilityBins([0.55, 0.55, 0.55, 0.55, 0.45, 0.45], [true, false, true, true, false, true]);

  it("sets a long title (a trained model's id) small enough to fit its width, a short one at 15", () => {
    const fontOf = (svg: string) => Number(/<text [^>]*y="28"[^>]*font-size="(\d+)"/.exec(svg)![1]);
    expect(fontOf(reliabilitySvg("noul, release r1", [{ name: "s", bins: before }]))).toBe(15);
    const long = "Reliability of ft:svc-shared:9ae9b90c01d743b1a9fb5d4949154db4 (cross-validated)";
    const size = fontOf(reliabilitySvg(long, [{ name: "s", bins: before }]));
    // At most 0.6 of the size per character (sans-serif's widest lowercase and digits are about 0.55), inside 540 less margins.
    expect(size * 0.6 * long.length).toBeLessThanOrEqual(540 - 20);
    expect(size).toBeGreaterThanOrEqual(8);
  });

  it("draws a self-contained diagram: axes, dashed diagonal, one line per series, a legend", () => {
    const svg = reliabilitySvg("noul, release r1", [
      { name: "before", bins: before },
      { name: "after", bins: after },
    ]);
    expect(svg.startsWith("<svg ")).toBe(true);
    expect(svg).toContain('width="540"');
    expect(svg).toContain('height="400"');
    expect(svg).toMatch(/<line [^>]*stroke-dasharray/);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    // 2 non-empty bins per series, plus one legend marker each.
    expect(svg.match(/<circle /g)).toHaveLength(2 + 2 + 2);
    expect(svg).toContain(">confidence</text>");
    expect(svg).toContain(">observed frequency</text>");
    expect(svg).toContain(">before</text>");
    expect(svg).toContain(">after</text>");
    for (const tick of ["0", "0.5", "1"]) expect(svg).toContain(`>${tick}</text>`);
    expect(svg).not.toMatch(/href|<script|url\(|<image|<foreignObject/i);
    expect(wellFormedTags(svg)).toBe(true);
  });

  it("gives the series distinct colours: a light and a strong blue for a before/after pair", () => {
    const svg = reliabilitySvg("t", [
      { name: "before", bins: before },
      { name: "after", bins: after },
    ]);
    const colours = [...svg.matchAll(/<polyline [^>]*stroke="([^"]+)"/g)].map((m) => m[1]);
    expect(colours).toEqual(["#9ab8e0", "#1f6fd1"]);
  });

  it("plots (mean confidence, accuracy) with at most two decimals and skips empty bins", () => {
    const bins = reliabilityBins([1 / 3, 1 / 3, 1 / 3], [true, false, false], 10);
    const svg = reliabilitySvg("t", [{ name: "s", bins }]);
    // x = 60 + 300/3 = 160, y = 50 + 300·(2/3) = 250 (both rounded from float arithmetic).
    expect(svg).toContain('points="160,250"');
    const numbers = [...svg.matchAll(/="(-?[\d.]+)"/g)].map((m) => m[1]!);
    for (const n of numbers) expect(n).toMatch(/^-?\d+(\.\d{1,2})?$/);
  });

  it("escapes hostile text in the title and series names", () => {
    const svg = reliabilitySvg(`<script>alert("x")</script> & 'co'`, [{ name: `</text><script>1</script>`, bins: before }]);
    expect(svg).not.toMatch(/<script/i);
    expect(svg.match(/<svg/g)).toHaveLength(1);
    expect(svg).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &apos;co&apos;");
    expect(svg).toContain("&lt;/text&gt;&lt;script&gt;1&lt;/script&gt;");
    expect(wellFormedTags(svg)).toBe(true);
  });

  it("draws a series with no non-empty bins as a legend entry only", () => {
    const svg = reliabilitySvg("t", [{ name: "empty", bins: [{ lower: 0, upper: 1, count: 0, mean_confidence: null, accuracy: null }] }]);
    expect(svg).not.toContain("<polyline");
    expect(svg).toContain(">empty</text>");
    expect(wellFormedTags(svg)).toBe(true);
  });

  it("refuses a bin whose figures lie outside [0, 1]", () => {
    expect(() => reliabilitySvg("t", [{ name: "s", bins: [{ lower: 0, upper: 1, count: 1, mean_confidence: 1.5, accuracy: 0 }] }])).toThrow(RangeError);
  });
});

describe("escapeXml", () => {
  it("escapes the five markup characters", () => {
    expect(escapeXml(`&<>"'`)).toBe("&amp;&lt;&gt;&quot;&apos;");
  });

  it("replaces characters XML forbids even escaped, and keeps the rest of Unicode", () => {
    expect(escapeXml("a\u0000b\u001Fc\uD800d")).toBe("a\uFFFDb\uFFFDc\uFFFDd");
    expect(escapeXml("tab\there, naïve, 😀")).toBe("tab\there, naïve, 😀");
  });
});
