import { describe, expect, it } from "vitest";
import { QUESTION_TYPES } from "../../contract/calibration.ts";
import { SERVED_STEPS } from "../../sidecar/decide/steps.ts";
import { servedPrefix, stepPrefixes } from "./read.ts";

describe("the training benchmark's step prefixes", () => {
  it("mark exactly one prefix of every question type as the served readout, the one running SERVED_STEPS' switches", () => {
    for (const type of QUESTION_TYPES) {
      const prefixes = stepPrefixes(type);
      expect(prefixes.filter((p) => p.served)).toHaveLength(1);
      const served = servedPrefix(type);
      expect(served.steps.contextual).toBe(SERVED_STEPS.contextual);
      if (type === "choice") expect(served.steps.bothOrders).toBe(SERVED_STEPS.bothOrders);
      // Each prefix is cached under its own key: no two readouts share answers.
      expect(new Set(prefixes.map((p) => p.key)).size).toBe(prefixes.length);
    }
  });

  it("measure both option orders for a choice only", () => {
    expect(stepPrefixes("choice").map((p) => p.key)).toEqual(["rendering", "contextual", "both-orders"]);
    expect(stepPrefixes("noul").map((p) => p.key)).toEqual(["rendering", "contextual"]);
    expect(stepPrefixes("score").map((p) => p.key)).toEqual(["rendering", "contextual"]);
  });
});
