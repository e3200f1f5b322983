/**
 * A stand-in for a GPU, for benchmarks only: a runtime that evaluates nothing and takes the time a GPU
 * would, in one serial queue, as a GPU runs one decode at a time. Two cost models:
 *
 *   - `RUNTIME_FAKE_PASS_MS=N`: every pass takes N ms, whatever its length (the first stand-in).
 *   - `RUNTIME_FAKE_GPU=h200`: every llama.cpp decode costs a fixed part and a part per token, and
 *     every label read at an answer position a part of its own (GPU_COSTS, fitted to the H200 figures
 *     of docs/deploy.md), so a pass on a new prefix costs two decodes (the prefix, then the rest and
 *     its read) and a pass over a kept prefix one, as in the engine (engine.ts); a group
 *     (/v1/score-group) its new prefixes packed into decodes of 512 tokens and one decode for the
 *     rests of up to 16 passes.
 *
 * It tokenizes with the real model, so that everything around a pass (the sidecar's admission, its
 * labels, the usage it counts, the bulk worker's commits) is what it is on a real runtime. Its answers
 * are fixed numbers derived from the pass's text: a benchmark of the service's own time per pass needs
 * passes that take a known time, not answers. Never for serving: the identity's `engine` says it is
 * a stand-in.
 *
 *     const engine = new FixedPassEngine(await Engine.load(options), { kind: "pass", passMs: 2 });
 *     const gpu = new FixedPassEngine(await Engine.load(options), { kind: "decode", name: "h200", ...GPU_COSTS.h200 });
 */
import { createHash } from "node:crypto";
import { ServiceError } from "../server-shared/errors.ts";
import type { Segment, Tokenized } from "../server-shared/runtime-protocol.ts";
import type { Engine, GroupPass, ScoreOptions, ScoreResult, ScoringEngine } from "./engine.ts";
import { Turns } from "./turns.ts";

/**
 * What a decode costs on a GPU, in ms: `decodeMs` whatever its length (kernel launches), `tokenMs` for
 * each token it evaluates, and `readMs` for reading the labels at an answer position. Fitted to
 * docs/deploy.md's H200 table (local CUDA build, the runtime calling the addon directly): decodes that
 * read nothing took 1.7, 1.9, 2.9 and 3.0 ms at 1, 8, 14 and 40 tokens (least squares: 1.87 + 0.032
 * a token), the label read 0.9-1.0 ms over its pass, and five questions over a 1,529-token state 91
 * ms, of which this model gives the state's decode about 51 ms and the ten short passes about 40.
 */
export const GPU_COSTS = { h200: { decodeMs: 1.8, tokenMs: 0.032, readMs: 1.0 } } as const;

/** The stand-in GPU's sequences (main.ts's default on a GPU) and the tokens one decode takes (node-llama-cpp's batch size). */
const GROUP_SEQUENCES = 16;
const GROUP_DECODE_TOKENS = 512;

/** Fixed numbers from a pass's text: each label a distinct share of at most half the mass. */
function fixedLogprobs(segments: readonly Segment[], labelTokens: readonly number[]): number[] {
  const digest = createHash("sha256").update(segments.map((s) => s.text).join("\u0000")).digest();
  return labelTokens.map((_, i) => Math.log((0.5 * (1 + digest[i % digest.length]!)) / (256 * labelTokens.length)));
}

/** A pass's token counts and its prefix's key (null: none). */
interface PassInfo {
  prefixTokens: number;
  restTokens: number;
  prefixText: string | null;
}

export type StandInCost = { kind: "pass"; passMs: number } | { kind: "decode"; name: string; decodeMs: number; tokenMs: number; readMs: number };

export class FixedPassEngine implements ScoringEngine {
  /** One turn at a time, real time first, as the engine takes them (engine.ts, turns.ts). */
  private readonly turns = new Turns();
  private passes = 0;
  private evaluatedTokens = 0;
  private busyMs = 0;
  /** When the stand-in GPU is done with the work it was given (performance.now() time). */
  private freeAt = 0;
  /** The prefix the last pass kept, as the real engine keeps it (only the rest is then "evaluated"). */
  private keptPrefix: string | null = null;
  /** The prefixes the group sequences hold after the last group, as the engine's group context holds them. */
  private heldPrefixes = new Set<string>();

  constructor(
    private readonly real: Pick<Engine, "tokenize" | "passTokens" | "maxTokensPerPass" | "dispose">,
    readonly cost: StandInCost,
  ) {}

  get description(): string {
    if (this.cost.kind === "pass") return `fixed ${this.cost.passMs} ms passes (a stand-in for a GPU, no evaluation)`;
    const { name, decodeMs, tokenMs, readMs } = this.cost;
    return `${name} decode costs: ${decodeMs} ms a decode, ${tokenMs} ms a token, ${readMs} ms a label read (a stand-in for a GPU, no evaluation)`;
  }

  get maxTokensPerPass(): number {
    return this.real.maxTokensPerPass;
  }

  tokenize(text: string, special: boolean): Tokenized {
    return this.real.tokenize(text, special);
  }

  /** Passes one decode carries: a GPU's default with decode costs (main.ts), one with fixed passes. */
  get sequences(): number {
    return this.cost.kind === "decode" ? GROUP_SEQUENCES : 1;
  }

  /**
   * A group as the engine runs it (engine.ts scoreGroup), `sequences` passes at a time: the prefixes
   * that none of the group's sequences holds packed into decodes of at most GROUP_DECODE_TOKENS, then
   * the rests packed the same way, and a label read for each pass. With fixed passes, one after another.
   * Turns as the engine takes them: an `urgent` group is one, any other one for each chunk or pass.
   */
  async scoreGroup(passes: readonly GroupPass[], urgent = false): Promise<ScoreResult[]> {
    const cost = this.cost;
    if (cost.kind === "pass") {
      const infos = passes.map((pass) => this.passOf(pass.segments, pass.options ?? {}));
      const arrived = performance.now();
      const all = async () => {
        const results: ScoreResult[] = [];
        for (const [i, pass] of passes.entries()) results.push(await this.runPass(pass, infos[i]!, arrived, !urgent));
        return results;
      };
      return urgent ? this.turns.run(all, true) : all();
    }
    const infos = passes.map((pass) => this.passOf(pass.segments, pass.options ?? {}));
    const arrived = performance.now();
    const turn = (work: () => Promise<void>) => (urgent ? work() : this.turns.run(work));
    const run = async () => {
      const evaluated: number[] = [];
      for (let start = 0; start < infos.length; start += GROUP_SEQUENCES) {
        const chunk = infos.slice(start, start + GROUP_SEQUENCES);
        const held = this.heldPrefixes;
        this.heldPrefixes = new Set(chunk.flatMap((info) => (info.prefixText === null ? [] : [info.prefixText])));
        const decodes: number[] = [];
        const fresh = new Set<string>();
        let prefill = 0;
        let packed = 0;
        for (const info of chunk) {
          let tokens = info.restTokens;
          if (info.prefixText !== null && !held.has(info.prefixText) && !fresh.has(info.prefixText)) {
            fresh.add(info.prefixText);
            prefill += info.prefixTokens;
            tokens += info.prefixTokens;
          }
          evaluated.push(tokens);
          if (packed > 0 && packed + info.restTokens > GROUP_DECODE_TOKENS) {
            decodes.push(packed);
            packed = 0;
          }
          packed += info.restTokens;
        }
        decodes.push(packed);
        // The new prefixes, packed together into decodes of GROUP_DECODE_TOKENS.
        for (let left = prefill; left > 0; left -= GROUP_DECODE_TOKENS) decodes.push(Math.min(left, GROUP_DECODE_TOKENS));
        await turn(() => this.occupy(arrived, decodes.reduce((ms, tokens) => ms + cost.decodeMs + tokens * cost.tokenMs, chunk.length * cost.readMs)));
      }
      this.passes += infos.length;
      this.evaluatedTokens += evaluated.reduce((a, b) => a + b, 0);
      return evaluated;
    };
    const evaluated = await (urgent ? this.turns.run(run, true) : run());
    return passes.map((pass, i) => ({
      promptTokens: infos[i]!.prefixTokens + infos[i]!.restTokens,
      prefixTokens: infos[i]!.prefixTokens,
      evaluatedTokens: evaluated[i]!,
      logprobs: fixedLogprobs(pass.segments, pass.labelTokens),
    }));
  }

  /** A pass's token counts and its prefix's key (null: none), checked as the engine checks them. */
  private passOf(segments: readonly Segment[], options: ScoreOptions): PassInfo {
    if (options.hiddenState || options.pooledState) throw new ServiceError("invalid_request", "this stand-in runtime reads no hidden states");
    const prefixSegments = options.prefixSegments ?? 0;
    // Tokenized as the engine tokenizes a pass (its prefix once while it stays the latest): the
    // runtime's own work around a pass is the real one.
    const tokens = this.real.passTokens(segments, prefixSegments);
    const prefixTokens = tokens.prefix.length;
    const restTokens = tokens.rest.length;
    if (prefixTokens + restTokens > this.real.maxTokensPerPass) {
      throw new ServiceError("pass_too_long", `pass has ${prefixTokens + restTokens} tokens; this runtime evaluates at most ${this.real.maxTokensPerPass}`);
    }
    // Kept for its owner only, as the real engine keeps it.
    const prefixText = prefixSegments > 0 ? `${options.prefixOwner ?? ""}\u0000${segments.slice(0, prefixSegments).map((s) => s.text).join("")}` : null;
    return { prefixTokens, restTokens, prefixText };
  }

  async score(segments: readonly Segment[], labelTokens: readonly number[], options: ScoreOptions = {}): Promise<ScoreResult> {
    return this.runPass({ segments, labelTokens, options }, this.passOf(segments, options), performance.now(), true);
  }

  /** One pass as score runs it: in a turn of its own when `ownTurn`, otherwise inside its caller's. */
  private async runPass(pass: GroupPass, info: PassInfo, arrived: number, ownTurn: boolean): Promise<ScoreResult> {
    const { prefixTokens, restTokens, prefixText } = info;
    const work = async () => {
      const kept = prefixText !== null && prefixText === this.keptPrefix;
      this.keptPrefix = prefixText;
      const evaluated = kept ? restTokens : prefixTokens + restTokens;
      const cost = this.cost;
      if (cost.kind === "pass") {
        const started = performance.now();
        await Bun.sleep(cost.passMs);
        this.busyMs += performance.now() - started;
      } else {
        // A new prefix is a decode of its own, as the engine evaluates it; the rest and its read another.
        const decodes = kept || prefixTokens === 0 ? [evaluated] : [prefixTokens, restTokens];
        await this.occupy(arrived, decodes.reduce((ms, tokens) => ms + cost.decodeMs + tokens * cost.tokenMs, cost.readMs));
      }
      this.passes += 1;
      this.evaluatedTokens += evaluated;
      return evaluated;
    };
    const evaluated = await (ownTurn ? this.turns.run(work) : work());
    return { promptTokens: prefixTokens + restTokens, prefixTokens, evaluatedTokens: evaluated, logprobs: fixedLogprobs(pass.segments, pass.labelTokens) };
  }

  /**
   * Holds the stand-in GPU for `ms` from when it is free (or from when the work `arrived`, if later):
   * a clock of its own, so that a timer that wakes late delays this work's answer, not the GPU's next
   * work, as a GPU that queued it would start it at once.
   */
  private async occupy(arrived: number, ms: number): Promise<void> {
    this.freeAt = Math.max(this.freeAt, arrived) + ms;
    this.busyMs += ms;
    const wait = this.freeAt - performance.now();
    if (wait > 0) await Bun.sleep(wait);
  }

  stats(): { passes: number; evaluatedTokens: number; busyMs: number } {
    return { passes: this.passes, evaluatedTokens: this.evaluatedTokens, busyMs: this.busyMs };
  }

  dispose(): Promise<void> {
    return this.real.dispose();
  }
}
