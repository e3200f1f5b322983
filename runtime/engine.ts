/**
 * The inference engine of the runtime: one GGUF (plus at most one LoRA adapter) hosted with llama.cpp
 * through node-llama-cpp (runs in the runtime process, on the GPU host; its CPU build on a developer
 * machine). It tokenizes and scores passes as server-shared/runtime-protocol.ts describes.
 *
 *     const engine = await Engine.load({ modelPath, adapterPath: null, maxTokensPerPass: 4096, threads: 2, gpu: false });
 *     const { promptTokens, logprobs } = await engine.score(prompt, [yesToken, noToken]);
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  getLlama,
  type ControlledEvaluateInputItem,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGpuType,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { ServiceError } from "../server-shared/errors.ts";
import { LOGPROB_FLOOR, type Tokenized } from "../server-shared/runtime-protocol.ts";
import type { Segment } from "../server-shared/runtime-protocol.ts";

export interface EngineOptions {
  modelPath: string;
  adapterPath: string | null;
  maxTokensPerPass: number;
  threads: number;
  /** "auto": the GPU build where a GPU is present (CUDA, else Vulkan), the CPU build otherwise; `false`: always the CPU build. */
  gpu: "auto" | LlamaGpuType;
}

export interface ScoreResult {
  promptTokens: number;
  logprobs: number[];
}

/** What the HTTP layer needs from an engine; tests put a fault-injecting fake behind it. */
export interface ScoringEngine {
  tokenize(text: string, special: boolean): Tokenized;
  score(segments: readonly Segment[], labelTokens: readonly number[]): Promise<ScoreResult>;
  /** Passes evaluated since start, and the milliseconds the engine spent evaluating them. */
  stats(): { passes: number; busyMs: number };
}

export class Engine implements ScoringEngine {
  /** Passes run one at a time: each one waits for the previous one to settle. */
  private queue: Promise<unknown> = Promise.resolve();
  private passes = 0;
  private busyMs = 0;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
    readonly maxTokensPerPass: number,
    /** Number of logits llama.cpp returns per position; label ids must be below it. */
    readonly vocabularySize: number,
    /** Engine and version, reported in the identity for operators. */
    readonly description: string,
  ) {}

  static async load(options: EngineOptions): Promise<Engine> {
    // build: "never": a runtime uses the prebuilt binaries that the package install brought, and
    // fails fast rather than compiling llama.cpp on a production host.
    const llama = await getLlama({ gpu: options.gpu, build: "never", progressLogs: false });
    const model = await llama.loadModel({ modelPath: options.modelPath });
    const context = await model.createContext({
      contextSize: options.maxTokensPerPass,
      sequences: 1,
      threads: options.threads,
      ...(options.adapterPath ? { lora: { adapters: [{ filePath: options.adapterPath }] } } : {}),
    });
    const sequence = context.getSequence();
    // One pass over the beginning-of-sequence token warms the engine up and tells the vocabulary
    // size, which node-llama-cpp does not expose otherwise.
    const warmup = await evaluateForProbabilities(sequence, [model.tokens.bos ?? (0 as Token)]);
    // Which build runs, and on what: "(cpu build)" or e.g. "(cuda build: NVIDIA H100 80GB HBM3)".
    const devices = llama.gpu ? await llama.getGpuDeviceNames() : [];
    const description = `node-llama-cpp ${packageVersion()} (${llama.gpu || "cpu"} build${devices.length > 0 ? `: ${devices.join(", ")}` : ""})`;
    return new Engine(llama, model, context, sequence, options.maxTokensPerPass, warmup.size, description);
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
   * full-vocabulary softmax. Refuses a pass longer than `maxTokensPerPass` before evaluating it.
   */
  async score(segments: readonly Segment[], labelTokens: readonly number[]): Promise<ScoreResult> {
    const bos = this.model.tokens.bos;
    const tokens = [...(bos === null ? [] : [bos]), ...segments.flatMap((s) => this.model.tokenize(s.text, s.special))];
    if (tokens.length === 0) throw new ServiceError("invalid_request", "prompt produced no tokens");
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

    const probabilities = await this.exclusive(async () => {
      const started = performance.now();
      try {
        return await evaluateForProbabilities(this.sequence, tokens);
      } finally {
        this.busyMs += performance.now() - started;
        this.passes += 1;
      }
    });
    const logprobs = labelTokens.map((token) => {
      const p = probabilities.get(token as Token) ?? Number.NaN;
      return p > 0 ? Math.min(0, Math.log(p)) : p === 0 ? LOGPROB_FLOOR : Number.NaN;
    });
    if (!logprobs.every(Number.isFinite)) throw new Error("engine returned non-finite logits");
    return { promptTokens: tokens.length, logprobs };
  }

  stats(): { passes: number; busyMs: number } {
    return { passes: this.passes, busyMs: this.busyMs };
  }

  async dispose(): Promise<void> {
    await this.exclusive(async () => {
      await this.context.dispose();
      await this.model.dispose();
      await this.llama.dispose();
    });
  }

  private exclusive<T>(run: () => Promise<T>): Promise<T> {
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }
}

/**
 * Evaluates `tokens` from an empty sequence and returns the full-vocabulary next-token distribution
 * after the last one (llama.cpp's softmax over every logit at temperature 1, with no sampling filter).
 * Clearing first makes every pass independent of the one before, so equal passes give equal numbers.
 */
async function evaluateForProbabilities(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<Map<Token, number>> {
  await sequence.clearHistory();
  const last = tokens.length - 1;
  const input = tokens.map((token, i): ControlledEvaluateInputItem => (i === last ? [token, { generateNext: { probabilities: true } }] : token));
  const output = await sequence.controlledEvaluate(input);
  const probabilities = output[last]?.next.probabilities;
  if (!probabilities || probabilities.size === 0) throw new Error("engine returned no distribution for the answer position");
  return probabilities;
}

function packageVersion(): string {
  const manifest = new URL("../package.json", import.meta.resolve("node-llama-cpp"));
  return (JSON.parse(readFileSync(fileURLToPath(manifest), "utf8")) as { version: string }).version;
}
