/**
 * runtime/llama-sequence.ts evaluates the runtime's passes through node-llama-cpp's addon directly.
 * Held here against node-llama-cpp's own `controlledEvaluate` on the same model and build (the CPU
 * build, two threads), in two contexts made alike: the same numbers, bit for bit, for the label read
 * and the whole distribution, for passes shorter and longer than a batch, after a kept prefix and
 * from an empty sequence; and a pass that fills the context exactly is evaluated as it is.
 */
import type { ControlledEvaluateInputItem, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModel } from "../local/model.ts";
import { loadLlama } from "../runtime/engine-build.ts";
import { labelReadRequest, LlamaSequence } from "../runtime/llama-sequence.ts";

const CONTEXT = 256;

/** A full garbage collection, then the finalizers it queued (node-llama-cpp reclaims a collected sequence in one). */
async function collectGarbage(): Promise<void> {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
}
const BATCH = 64;

describe("LlamaSequence: the runtime's passes through the addon, as node-llama-cpp evaluates them", () => {
  let model: LlamaModel;
  let dispose: () => Promise<void>;
  let theirs: LlamaContextSequence;
  let ours: LlamaSequence;
  let labels: Token[];
  const contexts: LlamaContext[] = [];
  const tokens = (n: number, offset = 0): Token[] =>
    Array.from({ length: n }, (_, i) => model.tokenize(` word${(i + offset) % 97}`)[0]!);

  beforeAll(async () => {
    const llama = await loadLlama("cpu");
    model = await llama.loadModel({ modelPath: (await ensureModel()).path });
    const make = async (contextSize: number) => {
      const context = await model.createContext({ contextSize, batchSize: BATCH, sequences: 1, threads: 2, swaFullCache: true });
      contexts.push(context);
      return context;
    };
    theirs = (await make(CONTEXT)).getSequence();
    ours = LlamaSequence.of(await make(CONTEXT), model);
    labels = [model.tokenize(" yes")[0]!, model.tokenize(" no")[0]!, model.tokenize(" maybe")[0]!];
    dispose = async () => {
      ours.dispose();
      for (const context of contexts) await context.dispose();
      await model.dispose();
      await llama.dispose();
    };
  }, 120_000);
  afterAll(() => dispose?.());

  /** node-llama-cpp's own evaluation of `rest` after what `theirs` holds, read as the runtime asks. */
  async function theirRead(rest: readonly Token[], generateNext: object) {
    const input = rest.map((token, i): ControlledEvaluateInputItem => (i === rest.length - 1 ? [token, { generateNext }] : token));
    return (await theirs.controlledEvaluate(input))[rest.length - 1]?.next;
  }

  it("reads the labels with node-llama-cpp's numbers, bit for bit, below and above a batch, kept prefix or not", async () => {
    // [prefix, rest]: no prefix; a prefix kept then a rest longer than a batch; rests of one token.
    const cases: [number, number][] = [[0, 5], [0, 150], [40, 8], [40, 1], [100, 70], [0, 1]];
    for (const [prefixLength, restLength] of cases) {
      const prefix = [model.tokens.bos!, ...tokens(prefixLength)].slice(0, prefixLength);
      const rest = tokens(restLength, 13 + prefixLength);
      await theirs.clearHistory();
      ours.eraseFrom(0);
      if (prefix.length > 0) {
        await theirs.controlledEvaluate(prefix);
        expect(await ours.evaluate(prefix, null)).toBeNull();
      }
      const want = await theirRead(rest, labelReadRequest(labels));
      const got = await ours.evaluate(rest, { kind: "labels", labels });
      expect(got?.kind).toBe("labels");
      if (got?.kind !== "labels") return;
      expect(got.token, `${prefixLength}+${restLength}`).toBe(want?.token);
      expect(got.totalLogitWeight, `${prefixLength}+${restLength}`).toBe(want?.totalLogitWeight);
      expect([...got.logits], `${prefixLength}+${restLength}`).toEqual([...want!.logits!]);
      expect(ours.length).toBe(prefix.length + rest.length);
    }
  }, 300_000);

  it("reads the whole distribution with node-llama-cpp's numbers, erases a rest as node-llama-cpp does, and keeps its tokens through a garbage collection", async () => {
    const prefix = [model.tokens.bos!, ...tokens(30)];
    await theirs.clearHistory();
    ours.eraseFrom(0);
    await theirs.controlledEvaluate(prefix);
    await ours.evaluate(prefix, null);
    for (const rest of [tokens(6, 50), tokens(3, 70)]) {
      await theirs.eraseContextTokenRanges([{ start: prefix.length, end: theirs.nextTokenIndex }]);
      ours.eraseFrom(prefix.length);
      // Nothing but the LlamaSequence holds node-llama-cpp's sequence object; a collection must not empty the sequence.
      await collectGarbage();
      const want = await theirRead(rest, { probabilities: true });
      const got = await ours.evaluate(rest, { kind: "distribution" });
      expect(got?.kind).toBe("distribution");
      if (got?.kind !== "distribution") return;
      expect(got.probabilities.size).toBe(want!.probabilities!.size);
      const differing = [...want!.probabilities!].filter(([token, p]) => got.probabilities.get(token) !== p);
      expect(differing.length, JSON.stringify(differing.slice(0, 5).map(([t, p]) => [t, p, got.probabilities.get(t)]))).toBe(0);
    }
  }, 120_000);

  it("evaluates a pass that fills the context exactly as it evaluates it in a larger context (node-llama-cpp shifts its beginning out)", async () => {
    const larger = LlamaSequence.of(await model.createContext({ contextSize: 2 * CONTEXT, batchSize: BATCH, sequences: 1, threads: 2, swaFullCache: true }).then((c) => (contexts.push(c), c)), model);
    try {
      const pass = [model.tokens.bos!, ...tokens(CONTEXT - 1, 5)];
      ours.eraseFrom(0);
      const full = await ours.evaluate(pass, { kind: "labels", labels });
      const roomy = await larger.evaluate(pass, { kind: "labels", labels });
      expect(full).toEqual(roomy);
      await expect(ours.evaluate(tokens(1), null)).rejects.toThrow(/overflow/);
      // node-llama-cpp keeps one cell free: the same pass there is not the same pass.
      await theirs.clearHistory();
      const shifted = await theirRead(pass, labelReadRequest(labels));
      expect(full?.kind === "labels" && [...full.logits]).not.toEqual([...shifted!.logits!]);
    } finally {
      larger.dispose();
    }
  }, 120_000);
});
