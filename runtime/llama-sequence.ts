/**
 * One llama.cpp sequence of a node-llama-cpp context, evaluated through node-llama-cpp's addon
 * directly: the same llama.cpp calls node-llama-cpp's `controlledEvaluate` makes for a runtime pass
 * (the same batches, the same logit positions, the same sampler and the same request to it), without
 * its machinery for many sequences and generation: the evaluation lock, the batch queue dispatched
 * on the next event-loop turn, the thread reservation, a new sampler made and disposed for every
 * evaluation, the erase's lock. `npm run bench:label-read` times both paths, interleaved; what it
 * measured is in docs/benchmarks.md.
 *
 * What differs from node-llama-cpp's own path: nothing in the numbers (test/llama-sequence.test.ts and
 * `bench:label-read` compare them), except that a pass that fills the context exactly is evaluated
 * as it is: node-llama-cpp keeps one cell free and shifted such a pass's beginning out of the
 * context before its last token, silently.
 *
 * It uses node-llama-cpp's internals (`_ctx`, `_llama._bindings`, `_model`), as createEmbeddingContext
 * reads the hidden state: they are checked at load, so another node-llama-cpp release fails at start,
 * not in a pass. The runtime evaluates one pass at a time over all its contexts (engine.ts), so no two
 * decodes ever overlap.
 */
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";

/** node-llama-cpp 3.22.1's addon context: the part of it this module calls (its dist/bindings/AddonTypes.d.ts). */
interface AddonContext {
  initBatch(size: number): void;
  /** Queues `tokens` at positions `first`...; returns the batch's output index of each of `outputs` (indexes into `tokens`). */
  addToBatch(sequenceId: number, first: number, tokens: Uint32Array, outputs: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(
    batchLogitIndex: number,
    sampler: AddonSampler,
    probabilities: boolean,
    confidence: boolean,
    logits: false | [tokens: readonly number[], includeMax: boolean, includeMin: boolean, includeSelected: boolean, includeTop: number],
    totalLogitWeight: boolean,
  ): Promise<[token: number, probabilities: number[] | undefined, confidence: number | undefined, logits: number[] | undefined, totalLogitWeight: number | undefined]>;
  removeTokenCellsFromSequence(sequenceId: number, start: number, end: number): boolean;
  /** llama_memory_seq_cp of every cell of `sourceSequenceId` into `targetSequenceId` (another stream: a copy); the source's last position. */
  copySequenceStateFromOtherSequence(targetSequenceId: number, sourceSequenceId: number): Promise<number>;
}

interface AddonSampler {
  applyConfig(config: object): void;
  dispose(): void;
}

/**
 * The runtime's label read in node-llama-cpp's terms (`controlledEvaluate`'s `generateNext`), under its
 * default (greedy) sampler: the labels' logits, the greedy token's (the largest logit) and the total
 * logit weight. `evaluate` makes this request of the addon directly; the benchmark and the tests make
 * it through node-llama-cpp to compare. The local CUDA build (`npm run build:engine`) answers exactly
 * this request in one walk over the logits (ops/engine-patch/label-read.inc).
 */
export function labelReadRequest(labels: readonly Token[]) {
  return { token: true, logits: { filter: { tokens: [...labels], includeSelected: true } }, totalLogitWeight: true } as const;
}

/** What a pass reads at its last position: the labels' logits and the greedy token's, and the total logit weight; or the whole distribution. */
export type Read = { kind: "labels"; labels: readonly Token[] } | { kind: "distribution" };

export type ReadResult =
  | { kind: "labels"; token: Token | null; logits: Map<Token, number>; totalLogitWeight: number | undefined }
  | { kind: "distribution"; probabilities: Map<Token, number> };

/** Token-value pairs as the addon returns them (token, value, token, value...) as a map. */
function pairs(flat: readonly number[] | undefined): Map<Token, number> {
  const map = new Map<Token, number>();
  for (let i = 1; i < (flat?.length ?? 0); i += 2) map.set(flat![i - 1] as Token, flat![i]!);
  return map;
}

export class LlamaSequence {
  /** Tokens the sequence holds: the KV cache's positions 0..length-1. */
  private held = 0;

  private constructor(
    /**
     * node-llama-cpp's object for the sequence, never used to evaluate but held: when it is garbage
     * collected, node-llama-cpp reclaims its id and empties its cells (a FinalizationRegistry), which
     * would erase a kept prefix between two passes.
     */
    readonly owner: LlamaContextSequence,
    private readonly ctx: AddonContext,
    private readonly id: number,
    private readonly batchSize: number,
    private readonly contextSize: number,
    private readonly sampler: AddonSampler,
  ) {}

  /** A sequence of the context not yet taken (its one with `sequences: 1`), taken from node-llama-cpp so that nothing else is given it. */
  static of(context: LlamaContext, model: LlamaModel): LlamaSequence {
    const owner = context.getSequence();
    const sequence = owner as unknown as { _sequenceId?: unknown; _resolveSamplerConfig?: (options: object) => object };
    const ctx = (context as unknown as { _ctx?: Partial<AddonContext> })._ctx;
    const internals = model as unknown as { _model?: unknown; _llama?: { _bindings?: { AddonSampler?: new (model: unknown) => AddonSampler } } };
    const Sampler = internals._llama?._bindings?.AddonSampler;
    const methods = ["initBatch", "addToBatch", "decodeBatch", "sampleToken", "removeTokenCellsFromSequence", "copySequenceStateFromOtherSequence"] as const;
    if (
      !ctx ||
      methods.some((name) => typeof ctx[name] !== "function") ||
      typeof sequence._sequenceId !== "number" ||
      typeof sequence._resolveSamplerConfig !== "function" ||
      !Sampler ||
      internals._model === undefined
    ) {
      throw new Error("node-llama-cpp's internals are not the ones the runtime was written for (3.22.1): runtime/llama-sequence.ts");
    }
    const sampler = new Sampler(internals._model);
    // The configuration node-llama-cpp gives a sampler for `generateNext` with no options: greedy.
    sampler.applyConfig(sequence._resolveSamplerConfig({}));
    return new LlamaSequence(owner, ctx as AddonContext, sequence._sequenceId, context.batchSize, context.contextSize, sampler);
  }

  /** Tokens held (the next position). */
  get length(): number {
    return this.held;
  }

  /** Forgets every token from position `start` on (0: everything). */
  eraseFrom(start: number): void {
    if (start >= this.held) return;
    if (!this.ctx.removeTokenCellsFromSequence(this.id, start, -1)) throw new Error("engine could not erase a sequence's tokens");
    this.held = start;
  }

  /**
   * Evaluates `tokens` after what the sequence holds, in decodes of at most the context's batch size
   * (as node-llama-cpp splits them), and reads `read` at the last one, or nothing. With `output` but no
   * read, the last position is an output all the same (an embeddings context's hidden state).
   */
  async evaluate(tokens: readonly Token[], read: Read | null, output = read !== null): Promise<ReadResult | null> {
    if (this.held + tokens.length > this.contextSize) throw new Error(`engine sequence overflow: ${this.held} + ${tokens.length} tokens in a context of ${this.contextSize}`);
    let outputIndex = -1;
    for (let start = 0; start < tokens.length; start += this.batchSize) {
      const piece = tokens.slice(start, start + this.batchSize);
      const last = start + piece.length === tokens.length;
      this.ctx.initBatch(piece.length);
      const outputs = this.ctx.addToBatch(this.id, this.held, Uint32Array.from(piece), last && output ? Uint32Array.of(piece.length - 1) : new Uint32Array(0));
      try {
        await this.ctx.decodeBatch();
      } catch (err) {
        // What a failed decode left in the cache is unknown: empty the sequence (engine.ts then trusts no kept prefix).
        this.ctx.removeTokenCellsFromSequence(this.id, 0, -1);
        this.held = 0;
        throw err;
      }
      this.held += piece.length;
      if (last && output) outputIndex = outputs[0] ?? -1;
    }
    if (read === null) return null;
    if (outputIndex < 0) throw new Error("engine returned no output position for the answer");
    if (read.kind === "labels") {
      // node-llama-cpp's own translation of the request: [tokens, includeMax, includeMin, includeSelected, includeTop].
      const { logits: ask, totalLogitWeight: weigh } = labelReadRequest(read.labels);
      const [token, , , logits, totalLogitWeight] = await this.ctx.sampleToken(outputIndex, this.sampler, false, false, [ask.filter.tokens, false, false, ask.filter.includeSelected, 0], weigh);
      return { kind: "labels", token: token === -1 ? null : (token as Token), logits: pairs(logits), totalLogitWeight };
    }
    const [, probabilities] = await this.ctx.sampleToken(outputIndex, this.sampler, true, false, false, false);
    return { kind: "distribution", probabilities: pairs(probabilities) };
  }

  /**
   * Evaluates each item's tokens after what its sequence holds, reading nothing, packed across the
   * sequences into as few decodes as the batch size allows (each sequence at most once a decode, its
   * tokens in order). Returns the decodes it took.
   */
  static async prefill(items: readonly { sequence: LlamaSequence; tokens: readonly Token[] }[]): Promise<number> {
    if (items.length === 0) return 0;
    const ctx = LlamaSequence.checkTogether(items);
    const batchSize = items[0]!.sequence.batchSize;
    const done = items.map(() => 0);
    let decodes = 0;
    while (items.some((item, i) => done[i]! < item.tokens.length)) {
      const pieces: { i: number; count: number }[] = [];
      let room = batchSize;
      for (const [i, item] of items.entries()) {
        const count = Math.min(room, item.tokens.length - done[i]!);
        if (count <= 0) continue;
        pieces.push({ i, count });
        room -= count;
        if (room === 0) break;
      }
      ctx.initBatch(batchSize - room);
      for (const { i, count } of pieces) {
        const { sequence, tokens } = items[i]!;
        ctx.addToBatch(sequence.id, sequence.held, Uint32Array.from(tokens.slice(done[i]!, done[i]! + count)), new Uint32Array(0));
      }
      await LlamaSequence.decodeOrEmpty(ctx, items);
      for (const { i, count } of pieces) {
        items[i]!.sequence.held += count;
        done[i]! += count;
      }
      decodes += 1;
    }
    return decodes;
  }

  /** The context of `items`, once they are distinct sequences of one context with room for their tokens. */
  private static checkTogether(items: readonly { sequence: LlamaSequence; tokens: readonly Token[] }[]): AddonContext {
    const ctx = items[0]!.sequence.ctx;
    if (items.some((item) => item.sequence.ctx !== ctx) || new Set(items.map((item) => item.sequence)).size !== items.length) {
      throw new Error("engine decodes together only distinct sequences of one context");
    }
    for (const { sequence, tokens } of items) {
      if (sequence.held + tokens.length > sequence.contextSize) throw new Error(`engine sequence overflow: ${sequence.held} + ${tokens.length} tokens in a context of ${sequence.contextSize}`);
    }
    return ctx;
  }

  /** Decodes the batch built on `ctx`; after a failure every sequence of `items` is emptied (what the decode left is unknown). */
  private static async decodeOrEmpty(ctx: AddonContext, items: readonly { sequence: LlamaSequence }[]): Promise<void> {
    try {
      await ctx.decodeBatch();
    } catch (err) {
      for (const { sequence } of items) {
        ctx.removeTokenCellsFromSequence(sequence.id, 0, -1);
        sequence.held = 0;
      }
      throw err;
    }
  }

  /** Holds what `source` (a sequence of the same context) holds, copied cell by cell; nothing is evaluated. */
  async copyFrom(source: LlamaSequence): Promise<void> {
    if (source.ctx !== this.ctx) throw new Error("engine can copy only between sequences of one context");
    this.eraseFrom(0);
    await this.ctx.copySequenceStateFromOtherSequence(this.id, source.id);
    this.held = source.held;
  }

  /**
   * Evaluates each item's tokens after what its sequence holds, all of them in one llama.cpp decode
   * (the caller keeps their total within the context's batch size, and gives each sequence once), and
   * reads each item's labels at its last token.
   */
  static async evaluateTogether(items: readonly { sequence: LlamaSequence; tokens: readonly Token[]; labels: readonly Token[] }[]): Promise<Extract<ReadResult, { kind: "labels" }>[]> {
    const ctx = LlamaSequence.checkTogether(items);
    const total = items.reduce((n, item) => n + item.tokens.length, 0);
    if (total > items[0]!.sequence.batchSize || items.some((item) => item.tokens.length === 0)) throw new Error(`engine cannot decode ${total} tokens together`);
    ctx.initBatch(total);
    const outputs = items.map(({ sequence, tokens }) => ctx.addToBatch(sequence.id, sequence.held, Uint32Array.from(tokens), Uint32Array.of(tokens.length - 1))[0] ?? -1);
    await LlamaSequence.decodeOrEmpty(ctx, items);
    for (const item of items) item.sequence.held += item.tokens.length;
    const reads: Extract<ReadResult, { kind: "labels" }>[] = [];
    for (const [i, { sequence, labels }] of items.entries()) {
      if (outputs[i]! < 0) throw new Error("engine returned no output position for the answer");
      const { logits: ask, totalLogitWeight: weigh } = labelReadRequest(labels);
      const [token, , , logits, totalLogitWeight] = await ctx.sampleToken(outputs[i]!, sequence.sampler, false, false, [ask.filter.tokens, false, false, ask.filter.includeSelected, 0], weigh);
      reads.push({ kind: "labels", token: token === -1 ? null : (token as Token), logits: pairs(logits), totalLogitWeight });
    }
    return reads;
  }

  /** Tokens one decode of this sequence's context takes. */
  get decodeTokens(): number {
    return this.batchSize;
  }

  dispose(): void {
    this.sampler.dispose();
  }
}
