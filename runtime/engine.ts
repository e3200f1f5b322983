/**
 * The inference engine of the runtime: one GGUF (plus at most one LoRA adapter) hosted with llama.cpp
 * through node-llama-cpp (runs in the runtime process, on the GPU host; its CPU build on a developer
 * machine). It tokenizes and scores passes as server-shared/runtime-protocol.ts describes. node-llama-cpp
 * loads the model and makes the contexts; passes are evaluated through its addon directly
 * (llama-sequence.ts: the same llama.cpp calls and numbers, without its per-evaluation machinery).
 *
 * Up to three llama.cpp contexts over the one model, their work in one queue of turns (turns.ts): a
 * pass, or a chunk of a group, is a turn, and a real-time group one turn taken before the waiting
 * background turns (scoreGroup's `urgent`):
 *   - the ordinary context, made at load, runs every pass that does not ask for the hidden state;
 *     llama.cpp computes the output layer (262,144 logits for Gemma 3) at the answer position only.
 *   - the hidden-state context, made on the first pass that asks for the hidden state, runs those
 *     passes only. It is an embeddings context (node-llama-cpp's internal `_embeddings`), and in
 *     that mode llama.cpp makes every prompt position an output, running each one through the
 *     output layer as well: such a pass costs about twice an ordinary one, and the context holds
 *     more than a GiB (see hiddenContext()), costs that ordinary passes, the real-time ones, must
 *     not pay. A runtime that is never asked for a hidden state never makes it.
 *   - the group context, made on the first /v1/score-group call of a runtime of `sequences` > 1
 *     (a GPU's default), holds that many sequences, each with its own KV cache: a group's passes
 *     that read no hidden state share their prefixes' evaluation and decode their rests together
 *     (scoreGroup). A CPU runtime's default of one sequence never makes it.
 * Both contexts split a pass into decodes alike, so a pass gives the same logprobs on either one.
 *
 * A pass with a prefix (the rendered state several passes share) is evaluated as the prefix's tokens,
 * then the rest; each context keeps the last prefix it evaluated in its KV cache, so the next pass
 * with the same prefix evaluates only its own rest (after erasing the rest before it). The split is
 * part of the pass: a hit and a miss give identical numbers (a test holds it). They are not the
 * numbers of the same tokens evaluated with no prefix: llama.cpp's CPU kernels are not
 * batch-invariant, so a pass evaluated as one decode and as its prefix and then its rest read
 * different label logprobs (docs/benchmarks.md), and RENDERING_VERSION changed with this rule. The KV cache is full-size for sliding-window layers too (`swaFullCache`),
 * so that erasing a rest never costs re-evaluating the prefix.
 *
 *     const engine = await Engine.load({ modelPath, adapterPath: null, maxTokensPerPass: 4096, threads: 2, build: "cpu" });
 *     const { promptTokens, logprobs } = await engine.score(prompt, [yesToken, noToken]);
 *     const { hiddenState } = await engine.score(prompt, [yesToken, noToken], { hiddenState: true });
 */
import { type Llama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { ServiceError } from "../server-shared/errors.ts";
import { LOGPROB_FLOOR, type Tokenized } from "../server-shared/runtime-protocol.ts";
import type { Segment } from "../server-shared/runtime-protocol.ts";
import { describeBuild, engineVersion, loadLlama, type EngineBuild } from "./engine-build.ts";
import { LlamaSequence, type ReadResult } from "./llama-sequence.ts";
import { Turns } from "./turns.ts";

export interface EngineOptions {
  modelPath: string;
  adapterPath: string | null;
  maxTokensPerPass: number;
  threads: number;
  /** The llama.cpp build to load (engine-build.ts); nothing else is tried. */
  build: EngineBuild;
  /**
   * How a pass reads its labels: `readLabels` (the label logits and the normaliser) when absent; a
   * benchmark's baseline gives another (distribution-reader.ts), and its passes then go one at a
   * time (`sequences` 1: a group decode reads labels only).
   */
  reader?: LabelReader;
  /**
   * Passes one decode may carry (scoreGroup): 1 evaluates a group's passes one after another, as
   * score does; more makes a context of that many sequences, each with `maxTokensPerPass` cells of
   * KV cache (llama.cpp's per-sequence streams), on the group's first use. Default 1.
   */
  sequences?: number;
}

/** One pass of a group (scoreGroup): what score takes. */
export interface GroupPass {
  segments: readonly Segment[];
  labelTokens: readonly number[];
  options?: ScoreOptions;
}

export interface ScoreResult {
  promptTokens: number;
  /** Tokens of the pass's prefix (0 without one). */
  prefixTokens: number;
  /** Tokens this pass evaluated: all of them, or the rest only when the prefix was kept. */
  evaluatedTokens: number;
  logprobs: number[];
  /** The final hidden state at the answer position (`n_embd` numbers); only when asked for. */
  hiddenState?: number[];
  /** The prefix's final hidden states averaged at every POOL_STRIDE-th token and its last (`n_embd` numbers); only when asked for. */
  pooledState?: number[];
}

export interface ScoreOptions {
  /** Also return the final hidden state at the answer position, read from the same pass. */
  hiddenState?: boolean;
  /** Leading segments that are the pass's prefix (runtime-protocol.ts `prefix_segments`); default 0. */
  prefixSegments?: number;
  /** Also return the prefix's pooled hidden state (runtime-protocol.ts `pooled_state`); needs `hiddenState` and a prefix. */
  pooledState?: boolean;
  /** Whom a kept prefix serves (runtime-protocol.ts `prefix_owner`): a prefix kept for another owner is evaluated again. */
  prefixOwner?: string;
}

/** What the HTTP layer needs from an engine; tests put a fault-injecting fake behind it. */
export interface ScoringEngine {
  tokenize(text: string, special: boolean): Tokenized;
  score(segments: readonly Segment[], labelTokens: readonly number[], options?: ScoreOptions): Promise<ScoreResult>;
  /**
   * Several passes in one call (runtime-protocol.ts `/v1/score-group`): each answered as score answers
   * it. `urgent` (a real-time call's): the whole group is one turn, ahead of the background's waiting
   * turns; otherwise each chunk of `sequences` passes (or each pass) is a turn of its own.
   */
  scoreGroup(passes: readonly GroupPass[], urgent?: boolean): Promise<ScoreResult[]>;
  /** Passes one decode carries at most (1: a group's passes run one after another). */
  readonly sequences: number;
  /** Passes evaluated since start, the tokens they evaluated, and the milliseconds the engine spent evaluating them. */
  stats(): { passes: number; evaluatedTokens: number; busyMs: number };
}

export class Engine implements ScoringEngine {
  /** Passes run one turn at a time, on any context: each one waits for the turn before it to settle (real time first). */
  private readonly turns = new Turns();
  private passes = 0;
  private busyMs = 0;
  /** The hidden-state context and its one sequence, made by the first pass that asks for a hidden state. */
  private hidden: { context: LlamaContext; sequence: PrefixSequence } | null = null;
  /** The group context (`sequences` > 1) and its sequences, each with the prefix it holds; made by the first group. */
  private group: { context: LlamaContext; sequences: { sequence: LlamaSequence; held: string | null }[] } | null = null;
  private evaluatedTokens = 0;
  /**
   * The latest prefix's segments (as JSON) and their tokens: the passes that share a state send it
   * again and again (five questions: six passes over one state), and tokenizing a 1,500-token state
   * again costs about a millisecond of CPU each time, more than a GPU's short pass takes to read.
   */
  private lastPrefix: { segments: string; tokens: readonly Token[] } | null = null;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: PrefixSequence,
    /** What both contexts are made with: size, threads, adapter. */
    private readonly contextOptions: ContextOptions,
    readonly maxTokensPerPass: number,
    /** Number of logits llama.cpp returns per position; label ids must be below it. */
    readonly vocabularySize: number,
    /** Engine and version, reported in the identity for operators. */
    readonly description: string,
    private readonly reader: LabelReader,
    readonly sequences: number,
  ) {}

  static async load(options: EngineOptions): Promise<Engine> {
    // Never compiles: a runtime uses a build the install brought or `npm run build:engine` made.
    const llama = await loadLlama(options.build);
    const model = await llama.loadModel({ modelPath: options.modelPath });
    const contextOptions: ContextOptions = {
      contextSize: options.maxTokensPerPass,
      sequences: 1,
      threads: options.threads,
      swaFullCache: true,
      ...(options.adapterPath ? { lora: { adapters: [{ filePath: options.adapterPath }] } } : {}),
    };
    const context = await model.createContext(contextOptions);
    const sequence = LlamaSequence.of(context, model);
    // One pass over the beginning-of-sequence token warms the engine up and tells the vocabulary
    // size, which node-llama-cpp does not expose otherwise.
    const warmup = await distributionAfter(sequence, [model.tokens.bos ?? (0 as Token)]);
    sequence.eraseFrom(0);
    // Which build runs, and on what: "cpu (prebuilt)" or e.g. "cuda (local build, sm_90) on NVIDIA H100 80GB HBM3".
    const devices = llama.gpu ? await llama.getGpuDeviceNames() : [];
    const description = `node-llama-cpp ${engineVersion()}, ${describeBuild(llama)}${devices.length > 0 ? ` on ${devices.join(", ")}` : ""}`;
    const reader = options.reader ?? readLabels;
    const sequences = options.reader ? 1 : (options.sequences ?? 1);
    return new Engine(llama, model, context, new PrefixSequence(sequence, reader), contextOptions, options.maxTokensPerPass, warmup.size, description, reader, sequences);
  }

  /** The model's own tokens for `text` (special-token markers parsed only when `special`), no beginning-of-sequence token added. */
  tokenize(text: string, special: boolean): Tokenized {
    const tokens = this.model.tokenize(text, special);
    // Decoded one token at a time, so a byte-fallback token shows as U+FFFD rather than as a merged character.
    const pieces = tokens.map((token) => this.model.detokenize([token], true));
    return { tokens, pieces };
  }

  /**
   * One pass: log-probabilities of `labelTokens` at the position right after `prompt`, under the
   * full-vocabulary softmax, and with `hiddenState` the final hidden state at that position. Refuses
   * a pass longer than `maxTokensPerPass` before evaluating it.
   */
  async score(segments: readonly Segment[], labelTokens: readonly number[], options: ScoreOptions = {}): Promise<ScoreResult> {
    const checked = this.checkedPass(segments, labelTokens, options);
    return this.exclusive(() => this.evaluatePass(checked, labelTokens, options));
  }

  /** A checked pass (score's work after the checks); call only inside `exclusive`. */
  private async evaluatePass({ prefix, rest }: { prefix: readonly Token[]; rest: Token[] }, labelTokens: readonly number[], options: ScoreOptions): Promise<ScoreResult> {
    const tokens = [...prefix, ...rest];
    const { reading, hiddenState, pooledState, evaluated } = await (async () => {
      // Made (once) before the pass's clock starts: making it is no evaluation.
      const hidden = options.hiddenState ? await this.hiddenContext() : null;
      const started = performance.now();
      try {
        const pool = options.pooledState && hidden ? () => lastHiddenState(hidden.context) : null;
        const { reading, evaluated, pooled } = await (hidden?.sequence ?? this.sequence).evaluate(prefix, rest, labelTokens as Token[], pool, options.prefixOwner ?? "");
        this.evaluatedTokens += evaluated;
        // Read before anything else evaluates: the context holds the hidden states of its latest batch only.
        return { reading, evaluated, pooledState: pooled ?? undefined, hiddenState: hidden ? lastHiddenState(hidden.context) : undefined };
      } finally {
        this.busyMs += performance.now() - started;
        this.passes += 1;
      }
    })();
    if (hiddenState && !hiddenState.every(Number.isFinite)) throw new Error("engine returned a non-finite hidden state");
    if (pooledState && !pooledState.every(Number.isFinite)) throw new Error("engine returned a non-finite pooled state");
    return {
      promptTokens: tokens.length,
      prefixTokens: prefix.length,
      evaluatedTokens: evaluated,
      logprobs: logprobsOf(reading, labelTokens),
      ...(hiddenState ? { hiddenState } : {}),
      ...(pooledState ? { pooledState } : {}),
    };
  }

  /**
   * Several passes, each answered as score answers it. With `sequences` > 1, the passes that read no
   * hidden state run on the group context: each distinct prefix evaluated once (unless a sequence
   * holds it) and copied to the sequences of the passes that share it, then every pass's rest in as
   * few decodes as the batch size allows, `sequences` passes at a time. Their numbers are not those
   * of score, as a pass split differently is not (llama.cpp's kernels are not batch-invariant; the
   * difference measured is runtime-protocol.ts GROUP_LOGPROB_TOLERANCE). The other passes, and every
   * pass where `sequences` is 1, run one after another as score runs them.
   *
   * An `urgent` group (a real-time call's) is one turn, ahead of the background turns waiting; any
   * other group takes a turn for each chunk and each pass, so that urgent work waits behind one of
   * them at most.
   */
  async scoreGroup(passes: readonly GroupPass[], urgent = false): Promise<ScoreResult[]> {
    const checked = passes.map((pass) => ({ pass, ...this.checkedPass(pass.segments, pass.labelTokens, pass.options ?? {}) }));
    const together = this.sequences > 1 ? checked.filter(({ pass }) => !pass.options?.hiddenState) : [];
    const turn = <T>(work: () => Promise<T>) => (urgent ? work() : this.exclusive(work));
    const evaluate = async () => {
      const results = new Map<GroupPass, ScoreResult>();
      for (let start = 0; start < together.length; start += this.sequences) {
        const chunk = together.slice(start, start + this.sequences);
        const answered = await turn(() => this.evaluateTogether(chunk));
        chunk.forEach(({ pass }, i) => results.set(pass, answered[i]!));
      }
      for (const { pass, prefix, rest } of checked) {
        if (!results.has(pass)) results.set(pass, await turn(() => this.evaluatePass({ prefix, rest }, pass.labelTokens, pass.options ?? {})));
      }
      return passes.map((pass) => results.get(pass)!);
    };
    return urgent ? this.exclusive(evaluate, true) : evaluate();
  }
  /** A pass's tokens, once it is checked as the protocol requires (422 `invalid_request` or `pass_too_long` otherwise), before anything is evaluated. */
  private checkedPass(segments: readonly Segment[], labelTokens: readonly number[], options: ScoreOptions): { prefix: readonly Token[]; rest: Token[] } {
    const { prefix, rest } = this.passTokens(segments, options.prefixSegments ?? 0);
    const tokens = [...prefix, ...rest];
    if (tokens.length === 0) throw new ServiceError("invalid_request", "prompt produced no tokens");
    if (rest.length === 0) throw new ServiceError("invalid_request", "prefix_segments: no token follows the prefix");
    if (options.pooledState && (!options.hiddenState || prefix.length === 0)) {
      throw new ServiceError("invalid_request", "pooled_state needs hidden_state and a prefix (prefix_segments > 0)");
    }
    if (tokens.length > this.maxTokensPerPass) {
      throw new ServiceError("pass_too_long", `pass has ${tokens.length} tokens; this runtime evaluates at most ${this.maxTokensPerPass}`);
    }
    labelTokens.forEach((token, i) => {
      if (token >= this.vocabularySize) {
        throw new ServiceError("invalid_request", `label_tokens.${i}: token ${token} is outside the vocabulary (size ${this.vocabularySize})`);
      }
    });
    // Duplicates would let the label probabilities sum past 1, which the protocol promises they never do.
    if (new Set(labelTokens).size !== labelTokens.length) {
      throw new ServiceError("invalid_request", "label_tokens: token ids must be distinct");
    }

    return { prefix, rest };
  }

  /**
   * Runs `chunk` (at most `sequences` passes, none reading a hidden state) on the group context; call
   * only inside `exclusive`. A pass's prefix is evaluated on the first sequence of the passes sharing
   * it (unless a sequence holds it already), the new prefixes packed together into decodes of at
   * most the batch size, and copied to the others; then all the rests are decoded together, packed
   * the same way.
   */
  private async evaluateTogether(chunk: readonly { pass: GroupPass; prefix: readonly Token[]; rest: Token[] }[]): Promise<ScoreResult[]> {
    const group = await this.groupContext();
    const started = performance.now();
    try {
      const keyOf = (prefix: readonly Token[], owner: string) => (prefix.length === 0 ? null : `${owner}\u0000${prefix.join(",")}`);
      const keys = chunk.map(({ pass, prefix }) => keyOf(prefix, pass.options?.prefixOwner ?? ""));
      // Each pass a sequence of its own; the first pass of a prefix takes a sequence that holds it, if one does.
      const free = new Set(group.sequences);
      const assigned: (typeof group.sequences)[number][] = [];
      const sources = new Map<string, (typeof group.sequences)[number]>();
      for (const key of new Set(keys)) {
        const holder = key === null ? undefined : group.sequences.find((s) => s.held === key && free.has(s));
        if (key !== null && holder) {
          sources.set(key, holder);
          free.delete(holder);
        }
      }
      const evaluated: number[] = [];
      // The prefixes no sequence holds, each evaluated once on the sequence of its first pass; then the copies.
      const fresh: { sequence: LlamaSequence; tokens: readonly Token[] }[] = [];
      const copies: { slot: (typeof group.sequences)[number]; source: (typeof group.sequences)[number]; key: string }[] = [];
      for (const [i, { prefix, rest }] of chunk.entries()) {
        const key = keys[i]!;
        const source = key === null ? undefined : sources.get(key);
        const slot = source && !assigned.includes(source) ? source : [...free][0]!;
        free.delete(slot);
        assigned.push(slot);
        evaluated.push(rest.length);
        if (key === null) {
          slot.held = null;
          slot.sequence.eraseFrom(0);
        } else if (source === slot) {
          // It holds the prefix: only its rest is evaluated.
          slot.sequence.eraseFrom(prefix.length);
        } else if (source) {
          // Another pass's sequence holds the prefix (or will, once the new prefixes are evaluated): copied, not evaluated.
          slot.held = null;
          copies.push({ slot, source, key });
        } else {
          // The first pass of a prefix no sequence holds: evaluated on its sequence, once.
          slot.held = null;
          slot.sequence.eraseFrom(0);
          fresh.push({ sequence: slot.sequence, tokens: prefix });
          slot.held = key;
          sources.set(key, slot);
          evaluated[i]! += prefix.length;
        }
      }
      // The new prefixes together, in as few decodes as the batch size allows.
      await LlamaSequence.prefill(fresh);
      for (const { slot, source, key } of copies) {
        await slot.sequence.copyFrom(source.sequence);
        slot.held = key;
      }
      // The rests, packed in order into decodes of at most the batch size.
      const readings: LabelReading[] = [];
      let batch: number[] = [];
      let size = 0;
      const flush = async () => {
        if (batch.length === 0) return;
        const reads = await LlamaSequence.evaluateTogether(batch.map((i) => ({ sequence: assigned[i]!.sequence, tokens: chunk[i]!.rest, labels: chunk[i]!.pass.labelTokens as Token[] })));
        batch.forEach((i, j) => (readings[i] = labelReadingOf(reads[j]!)));
        batch = [];
        size = 0;
      };
      for (const [i, { rest }] of chunk.entries()) {
        if (size + rest.length > assigned[i]!.sequence.decodeTokens) await flush();
        if (rest.length > assigned[i]!.sequence.decodeTokens) {
          // Longer than one decode: alone, in decodes of the batch size.
          readings[i] = await this.reader(assigned[i]!.sequence, rest, chunk[i]!.pass.labelTokens as Token[]);
          continue;
        }
        batch.push(i);
        size += rest.length;
      }
      await flush();
      // Each sequence now holds its prefix and its rest: the rest is erased when it is next used.
      return chunk.map(({ pass, prefix, rest }, i) => {
        this.evaluatedTokens += evaluated[i]!;
        return { promptTokens: prefix.length + rest.length, prefixTokens: prefix.length, evaluatedTokens: evaluated[i]!, logprobs: logprobsOf(readings[i]!, pass.labelTokens) };
      });
    } catch (err) {
      // Whatever the sequences hold after a failure, none of it is trusted as a kept prefix.
      for (const slot of group.sequences) slot.held = null;
      throw err;
    } finally {
      this.busyMs += performance.now() - started;
      this.passes += chunk.length;
    }
  }

  /** The group context and its sequences, made on first use; call only inside `exclusive`. */
  private async groupContext(): Promise<NonNullable<Engine["group"]>> {
    if (!this.group) {
      // The ordinary context's batch size, so that a decode splits alike on both.
      const context = await this.model.createContext({ ...this.contextOptions, sequences: this.sequences, batchSize: this.context.batchSize });
      this.group = { context, sequences: Array.from({ length: this.sequences }, () => ({ sequence: LlamaSequence.of(context, this.model), held: null })) };
    }
    return this.group;
  }

  stats(): { passes: number; evaluatedTokens: number; busyMs: number } {
    return { passes: this.passes, evaluatedTokens: this.evaluatedTokens, busyMs: this.busyMs };
  }

  async dispose(): Promise<void> {
    await this.exclusive(async () => {
      this.hidden?.sequence.sequence.dispose();
      await this.hidden?.context.dispose();
      this.hidden = null;
      for (const slot of this.group?.sequences ?? []) slot.sequence.dispose();
      await this.group?.context.dispose();
      this.group = null;
      this.sequence.sequence.dispose();
      await this.context.dispose();
      await this.model.dispose();
      await this.llama.dispose();
    });
  }

  /**
   * A pass's tokens: its prefix's (the first `prefixSegments` segments, after the beginning-of-sequence
   * token; tokenized once while it stays the latest) and the rest's (after the beginning-of-sequence
   * token when there is no prefix).
   */
  passTokens(segments: readonly Segment[], prefixSegments: number): { prefix: readonly Token[]; rest: Token[] } {
    const bos = this.model.tokens.bos;
    const prefix = prefixSegments > 0 ? this.prefixTokens(segments.slice(0, prefixSegments)) : [];
    const rest = [...(bos === null || prefixSegments > 0 ? [] : [bos]), ...this.segmentTokens(segments.slice(prefixSegments))];
    return { prefix, rest };
  }

  /** The tokens of a prefix (the beginning-of-sequence token, then its segments'), tokenized once while it stays the latest. */
  private prefixTokens(segments: readonly Segment[]): readonly Token[] {
    const key = JSON.stringify(segments.map((s) => [s.text, s.special]));
    if (this.lastPrefix?.segments !== key) {
      const bos = this.model.tokens.bos;
      this.lastPrefix = { segments: key, tokens: [...(bos === null ? [] : [bos]), ...this.segmentTokens(segments)] };
    }
    return this.lastPrefix.tokens;
  }

  /** The model's tokens for `segments`, each tokenized on its own, special-token markers parsed only where marked. */
  private segmentTokens(segments: readonly Segment[]): Token[] {
    return segments.flatMap((s) => this.model.tokenize(s.text, s.special));
  }

  /** The hidden-state context, made on first use; call only inside `exclusive`. */
  private async hiddenContext(): Promise<{ context: LlamaContext; sequence: PrefixSequence }> {
    if (!this.hidden) {
      // `_embeddings` is node-llama-cpp's internal option (what createEmbeddingContext sets; absent
      // from its public types): llama.cpp then keeps each position's final hidden state beside its
      // logits, so that a pass returns the answer position's hidden state without a second evaluation.
      //
      // Its batch size (tokens per llama.cpp decode) is the ordinary context's, which keeps the two
      // contexts' numbers identical: llama.cpp's CPU kernels are not batch-invariant, so how a pass
      // is split into decodes moves its numbers (a 152-token prompt evaluated as one decode, or as
      // 128 tokens then 24, differs by 0.19 in a label's logprob and by 4% in the hidden state). A
      // smaller batch would bound the memory this context adds (a row of 262,144 logits, 1 MiB, per
      // position of a decode, in its output buffer and again in its compute buffer; touched as passes
      // reach the batch size), but hidden-state passes would then get numbers of their own. Measured
      // with Gemma 3 270M Q4_K_M, CPU build, two threads, as the runtime process's RSS (560 MiB
      // before this context exists) after passes of 579 tokens, and median ms per pass:
      //
      //     batch size               added RSS   24 tokens   579 tokens   same numbers as the ordinary context
      //     ordinary context (512)           -      ~100 ms      ~950 ms   -
      //     512 (this one)          ~+1,100 MiB     ~165 ms    ~2,050 ms   yes, at every length tried (1 to 4,096 tokens)
      //     256                       ~+560 MiB     ~170 ms    ~2,080 ms   no: at 257, 278, 300, 800, 1,025... tokens they differ
      //     128                       ~+290 MiB     ~160 ms    ~2,040 ms   no: at 129, 152, 278, 400, 700... tokens they differ
      const context = await this.model.createContext({
        ...this.contextOptions,
        batchSize: this.context.batchSize,
        _embeddings: true,
      } as Parameters<LlamaModel["createContext"]>[0]);
      this.hidden = { context, sequence: new PrefixSequence(LlamaSequence.of(context, this.model), this.reader) };
    }
    return this.hidden;
  }

  private exclusive<T>(run: () => Promise<T>, urgent = false): Promise<T> {
    return this.turns.run(run, urgent);
  }
}

/** What both contexts are made with (the hidden-state one adds its batch size and `_embeddings`). */
type ContextOptions = Parameters<LlamaModel["createContext"]>[0] & {};

/**
 * The final hidden state (after the output norm) of the last token that `context` evaluated, as plain
 * numbers; `context` must be an embeddings context. node-llama-cpp exposes it only through its
 * internal addon context, as createEmbeddingContext reads it.
 */
function lastHiddenState(context: LlamaContext): number[] {
  // The addon reads llama_get_embeddings_ith(ctx, -1) whatever length it is given (it checks only that it is positive).
  const internal = context as unknown as { _ctx: { getEmbedding(inputTokensLength: number): Float64Array } };
  return Array.from(internal._ctx.getEmbedding(1));
}

/**
 * Tokens between two reads of a pooled prefix. node-llama-cpp reads one hidden state per evaluation
 * (the last position's: its addon exposes neither per-token states nor a mean pooling for a model whose
 * file names none), so a pooled prefix is evaluated in pieces of this many tokens and the state read
 * after each: a mean over every POOL_STRIDE-th position (and the last), not over every token.
 */
export const POOL_STRIDE = 32;

/**
 * One llama.cpp sequence and the prefix it holds evaluated. `evaluate(prefix, rest)` evaluates the
 * prefix (unless it is the one held) and then the rest, as two separate evaluations, so that the
 * numbers are the same whether the prefix was held or not; with no prefix, the pass is evaluated
 * from an empty sequence as one evaluation, and nothing is held.
 */
class PrefixSequence {
  /** The prefix whose evaluation the KV cache holds (its positions 0..length-1), or null. */
  private held: readonly Token[] | null = null;
  /** Whom the held prefix serves: only a pass naming the same owner reuses it. */
  private heldOwner = "";
  /** The held prefix's pooled state when it was evaluated in pieces (`pool`), else null: a prefix evaluated whole is another evaluation. */
  private heldPool: number[] | null = null;

  constructor(
    readonly sequence: LlamaSequence,
    private readonly read: LabelReader,
  ) {}

  /**
   * `pool`, when given, reads the hidden state of the last position evaluated: the prefix is then
   * evaluated in pieces of POOL_STRIDE tokens, the state read after each, and their mean returned as
   * `pooled` (kept with the prefix, so a hit returns it again).
   */
  async evaluate(
    prefix: readonly Token[],
    rest: readonly Token[],
    labels: readonly Token[],
    pool: (() => number[]) | null = null,
    owner = "",
  ): Promise<{ reading: LabelReading; evaluated: number; pooled: number[] | null }> {
    if (prefix.length === 0) {
      this.held = null;
      this.sequence.eraseFrom(0);
      return { reading: await this.read(this.sequence, rest, labels), evaluated: rest.length, pooled: null };
    }
    try {
      let evaluated = rest.length;
      const pooledMode = pool !== null;
      if (this.holds(prefix, pooledMode, owner)) this.sequence.eraseFrom(prefix.length);
      if (!this.holds(prefix, pooledMode, owner) || this.sequence.length !== prefix.length) {
        // A miss (or a cache that could not keep the prefix): start from an empty sequence.
        this.held = null;
        this.heldPool = null;
        this.sequence.eraseFrom(0);
        const pooled = pool ? await this.evaluatePooled(prefix, pool) : (await this.sequence.evaluate(prefix, null), null);
        this.held = [...prefix];
        this.heldOwner = owner;
        this.heldPool = pooled;
        evaluated += prefix.length;
      }
      return { reading: await this.read(this.sequence, rest, labels), evaluated, pooled: this.heldPool };
    } catch (err) {
      // Whatever the sequence holds after a failure, it is not trusted as a kept prefix.
      this.held = null;
      this.heldPool = null;
      throw err;
    }
  }

  /** Evaluates `prefix` in pieces of POOL_STRIDE tokens, reading the last position's state after each; their mean. */
  private async evaluatePooled(prefix: readonly Token[], pool: () => number[]): Promise<number[]> {
    let sum: number[] | null = null;
    let reads = 0;
    for (let start = 0; start < prefix.length; start += POOL_STRIDE) {
      const piece = prefix.slice(start, start + POOL_STRIDE);
      // Only the piece's last position is an output, as the addon reads the last one.
      await this.sequence.evaluate(piece, null, true);
      const state = pool();
      sum = sum ? sum.map((v, j) => v + state[j]!) : state;
      reads += 1;
    }
    return sum!.map((v) => v / reads);
  }

  private holds(prefix: readonly Token[], pooled: boolean, owner: string): boolean {
    const held = this.held;
    return held !== null && this.heldOwner === owner && (this.heldPool !== null) === pooled && held.length === prefix.length && held.every((token, i) => token === prefix[i]);
  }
}

/**
 * Evaluates `tokens` after what `sequence` holds and returns the whole next-token distribution after
 * the last one (llama.cpp's softmax over every logit at temperature 1, with no sampling filter).
 */
async function distributionAfter(sequence: LlamaSequence, tokens: readonly Token[]): Promise<Map<Token, number>> {
  const read = await sequence.evaluate(tokens, { kind: "distribution" });
  if (read?.kind !== "distribution" || read.probabilities.size === 0) throw new Error("engine returned no distribution for the answer position");
  return read.probabilities;
}

/**
 * What a pass reads at the answer position: the raw logits of the label tokens, and the log of the
 * softmax's normaliser, so that a label's log-probability is `logit - logNormaliser`.
 */
export type LabelReading = { logits: Map<Token, number>; logNormaliser: number };

/** Evaluates `tokens` after what `sequence` holds and reads `labels` at the position after the last one. */
export type LabelReader = (sequence: LlamaSequence, tokens: readonly Token[], labels: readonly Token[]) => Promise<LabelReading>;

/**
 * Evaluates `tokens` after what `sequence` holds and reads the labels' logits and the normaliser at
 * the position after the last one. llama.cpp's addon returns the logits of the labels and of the
 * greedy choice (the largest logit) and the sum of exp(logit - largest) over the whole vocabulary,
 * without sorting or copying the 262,144-entry distribution to JavaScript. It sums the exponentials
 * in float32, as the whole distribution's softmax does; the two differ by up to about 1e-3 in a
 * logprob, the label read the nearer to a double-precision sum (test/runtime.test.ts).
 */
async function readLabels(sequence: LlamaSequence, tokens: readonly Token[], labels: readonly Token[]): Promise<LabelReading> {
  const read = await sequence.evaluate(tokens, { kind: "labels", labels });
  const largest = read?.kind === "labels" && read.token !== null ? read.logits.get(read.token) : undefined;
  const weight = read?.kind === "labels" ? read.totalLogitWeight : undefined;
  if (read?.kind !== "labels" || largest === undefined || weight === undefined || !(weight >= 1)) {
    throw new Error("engine returned no distribution for the answer position");
  }
  return { logits: read.logits, logNormaliser: largest + Math.log(weight) };
}


/** A label read (LlamaSequence.evaluateTogether) as a LabelReading, checked as readLabels checks it. */
function labelReadingOf(read: Extract<ReadResult, { kind: "labels" }>): LabelReading {
  const largest = read.token !== null ? read.logits.get(read.token) : undefined;
  if (largest === undefined || read.totalLogitWeight === undefined || !(read.totalLogitWeight >= 1)) throw new Error("engine returned no distribution for the answer position");
  return { logits: read.logits, logNormaliser: largest + Math.log(read.totalLogitWeight) };
}

/** The labels' log-probabilities from a reading: finite, at most 0, an underflow read as LOGPROB_FLOOR. */
function logprobsOf(reading: LabelReading, labelTokens: readonly number[]): number[] {
  const logprobs = labelTokens.map((token) => {
    const logit = reading.logits.get(token as Token) ?? Number.NaN;
    return Math.min(0, Math.max(LOGPROB_FLOOR, logit - reading.logNormaliser));
  });
  if (!logprobs.every(Number.isFinite)) throw new Error("engine returned non-finite logits");
  return logprobs;
}
