/**
 * A stand-in for a GPU, for benchmarks only (issue 37): a runtime whose every pass takes a fixed time
 * (`RUNTIME_FAKE_PASS_MS`, e.g. 2, about an H100's short pass) and evaluates nothing. It tokenizes
 * with the real model, so that everything around a pass (the sidecar's admission, its labels, the
 * usage it counts, the bulk worker's commits) is what it is on a real runtime; only the evaluation is
 * replaced, by a wait of that time in one serial queue, as a GPU runs one pass at a time. Its answers
 * are fixed numbers derived from the pass's text: a benchmark of the service's own time per pass
 * needs passes that take a known time, not answers. Never for serving: the identity's `engine` says
 * "fixed N ms passes (a stand-in for a GPU, no evaluation)".
 *
 *     const engine = new FixedPassEngine(await Engine.load(options), 2);
 */
import { createHash } from "node:crypto";
import { ServiceError } from "../server-shared/errors.ts";
import type { Segment, Tokenized } from "../server-shared/runtime-protocol.ts";
import type { Engine, ScoreOptions, ScoreResult, ScoringEngine } from "./engine.ts";

export class FixedPassEngine implements ScoringEngine {
  private queue: Promise<unknown> = Promise.resolve();
  private passes = 0;
  private evaluatedTokens = 0;
  private busyMs = 0;
  /** The prefix the last pass kept, as the real engine keeps it (only the rest is then "evaluated"). */
  private keptPrefix: string | null = null;

  constructor(
    private readonly real: Pick<Engine, "tokenize" | "passTokens" | "maxTokensPerPass" | "dispose">,
    readonly passMs: number,
  ) {}

  get description(): string {
    return `fixed ${this.passMs} ms passes (a stand-in for a GPU, no evaluation)`;
  }

  get maxTokensPerPass(): number {
    return this.real.maxTokensPerPass;
  }

  tokenize(text: string, special: boolean): Tokenized {
    return this.real.tokenize(text, special);
  }

  async score(segments: readonly Segment[], labelTokens: readonly number[], options: ScoreOptions = {}): Promise<ScoreResult> {
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
    const run = this.queue.then(async () => {
      const started = performance.now();
      await Bun.sleep(this.passMs);
      this.busyMs += performance.now() - started;
      this.passes += 1;
      const kept = prefixText !== null && prefixText === this.keptPrefix;
      this.keptPrefix = prefixText;
      const evaluated = kept ? restTokens : prefixTokens + restTokens;
      this.evaluatedTokens += evaluated;
      return evaluated;
    });
    this.queue = run.catch(() => undefined);
    const evaluated = await run;
    // Fixed numbers from the pass's text: each label a distinct share of at most half the mass.
    const digest = createHash("sha256").update(segments.map((s) => s.text).join("\u0000")).digest();
    const logprobs = labelTokens.map((_, i) => Math.log((0.5 * (1 + digest[i % digest.length]!)) / (256 * labelTokens.length)));
    return { promptTokens: prefixTokens + restTokens, prefixTokens, evaluatedTokens: evaluated, logprobs };
  }

  stats(): { passes: number; evaluatedTokens: number; busyMs: number } {
    return { passes: this.passes, evaluatedTokens: this.evaluatedTokens, busyMs: this.busyMs };
  }

  dispose(): Promise<void> {
    return this.real.dispose();
  }
}
