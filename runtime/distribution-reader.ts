/**
 * The whole-distribution label read, a benchmark's baseline (runtime/main.ts wires it in with
 * RUNTIME_READOUT=distribution; the engine reads labels with `readLabels` otherwise): each pass
 * reads llama.cpp's whole next-token probability map and takes the labels' entries from it. The
 * numbers match the label read within about 1e-3 in a logprob (test/runtime.test.ts); the pass is
 * slower by the map's size (docs/benchmarks.md).
 */
import { LOGPROB_FLOOR } from "../server-shared/runtime-protocol.ts";
import type { LabelReader } from "./engine.ts";

/** The labels' entries of the whole distribution, as log-probabilities over a normaliser of 0; an underflowed probability reads as the floor. */
export const readDistribution: LabelReader = async (sequence, tokens, labels) => {
  const read = await sequence.evaluate(tokens, { kind: "distribution" });
  if (read?.kind !== "distribution" || read.probabilities.size === 0) throw new Error("engine returned no distribution for the answer position");
  const logits = new Map(
    labels.map((token) => {
      const p = read.probabilities.get(token) ?? Number.NaN;
      return [token, p > 0 ? Math.log(p) : p === 0 ? LOGPROB_FLOOR : Number.NaN] as const;
    }),
  );
  return { logits, logNormaliser: 0 };
};
