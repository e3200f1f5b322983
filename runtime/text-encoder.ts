/**
 * A sentence encoder (local/text-encoder.ts: all-MiniLM-L6-v2 as ONNX, with its WordPiece
 * vocabulary) run by ONNX Runtime: a text's embedding, the mean of its pieces' final states,
 * L2-normalised, as sentence-transformers computes it (an input a trained head may read).
 *
 * The model was trained on at most 256 pieces. A longer text is read in windows of that size, each
 * embedded on its own, and their embeddings averaged (weighted by pieces) and normalised again; only
 * its first ENCODER_MAX_PIECES pieces are read (a state the sidecar admits is far shorter: its pass
 * holds at most LIMITS.tokensPerPass of the model's tokens). One text at a time, like the runtime's
 * other engines.
 *
 *     const encoder = await SentenceEncoder.load({ modelPath, tokenizerPath, threads: 2 });
 *     const { embedding, tokens } = await encoder.embed("The film was a delight.");   // 384 numbers
 */
import { readFile } from "node:fs/promises";
import * as ort from "onnxruntime-node";
import { WordPiece } from "./wordpiece.ts";

/** Pieces per window, "[CLS]" and "[SEP]" included (the model's max_seq_length). */
export const ENCODER_WINDOW = 256;
/** The most pieces of one text read (64 windows); the rest is not. */
export const ENCODER_MAX_PIECES = 64 * (ENCODER_WINDOW - 2);

/** Where an encoder's vocabulary lies: beside its ONNX file, as `<name>.tokenizer.json`. */
export const encoderTokenizerPath = (modelPath: string) => modelPath.replace(/\.onnx$/, "") + ".tokenizer.json";

export interface SentenceEncoderOptions {
  modelPath: string;
  tokenizerPath: string;
  threads: number;
}

export class SentenceEncoder {
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly tokenizer: WordPiece,
    /** Numbers in an embedding, read from the graph. */
    readonly width: number,
  ) {}

  static async load(options: SentenceEncoderOptions): Promise<SentenceEncoder> {
    const tokenizer = WordPiece.fromJson(await readFile(options.tokenizerPath, "utf8"));
    const session = await ort.InferenceSession.create(options.modelPath, { intraOpNumThreads: options.threads, interOpNumThreads: 1 });
    const output = session.outputMetadata[0];
    const width = output && output.isTensor ? output.shape[1] : undefined;
    if (session.inputNames[0] !== "input_ids" || session.outputNames[0] !== "embedding" || typeof width !== "number") {
      throw new Error(`${options.modelPath} is not a sentence encoder of this service (an input "input_ids" of 1 x T, an output "embedding" of 1 x N)`);
    }
    return new SentenceEncoder(session, tokenizer, width);
  }

  embed(text: string): Promise<{ embedding: number[]; tokens: number }> {
    const run = this.queue.then(() => this.evaluate(text));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async evaluate(text: string): Promise<{ embedding: number[]; tokens: number }> {
    const [cls, ...rest] = this.tokenizer.encode(text, ENCODER_MAX_PIECES + 2);
    const sep = rest.pop()!;
    const pieces = rest;
    const sum = new Float64Array(this.width);
    const step = ENCODER_WINDOW - 2;
    let tokens = 0;
    for (let at = 0; at === 0 || at < pieces.length; at += step) {
      const ids = [cls!, ...pieces.slice(at, at + step), sep];
      const input = new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
      const output = (await this.session.run({ input_ids: input })).embedding!.data as Float32Array;
      for (let i = 0; i < this.width; i++) sum[i]! += output[i]! * ids.length;
      tokens += ids.length;
    }
    const norm = Math.hypot(...sum) || 1;
    return { embedding: Array.from(sum, (x) => x / norm), tokens };
  }
}
