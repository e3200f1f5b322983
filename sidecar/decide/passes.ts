/**
 * The passes of one execution at the runtime: sent in the order they are asked for, at most
 * PASSES_IN_FLIGHT at once (the next one read and tokenized while the one before is evaluated), or
 * sharing the slots of a bulk execution's records (PassSlots: each record's passes before the next's),
 * each response's identity checked by the client it is given (identity.ts `verifiedClient`), with
 * the execution's usage counted. Served decisions (execute.ts), trained releases and training's
 * examples (trained.ts) all run their passes through it.
 *
 *     const runner = new PassRunner(verifiedClient(client, runtime), admission.fixed, signal);
 *     const logprobs = await runner.run(pass, words, true);
 *     const { usage, passes } = { usage: runner.usage(), passes: runner.passes };
 */
import type { Usage } from "../../contract/decision.ts";
import type { EmbedResponse } from "../../server-shared/runtime-protocol.ts";
import { RuntimeError, type RuntimeClient } from "../runtime/client.ts";
import { labelTokens, type ResolvedLabels } from "./labels.ts";
import { labelLogprobs } from "./readout.ts";
import type { Pass } from "./render.ts";

/**
 * Passes an execution has at the runtime at once: the one being evaluated and the next, which the
 * runtime has read and tokenized by the time the first ends. No more: a runtime does not cancel a
 * pass whose caller went away, so an abandoned execution leaves at most one pass behind it.
 */
export const PASSES_IN_FLIGHT = 2;

/**
 * Slots for passes at the runtime, shared by the PassRunners of one execution: at most `capacity`
 * passes in flight; a freed slot goes to the waiting pass of the lowest rank (a bulk execution's
 * record order), the earliest asked among equals. A bulk execution's records share one, so that the
 * runtime never waits between records, and each record's passes go before the next record's (its
 * state stays the runtime's kept prefix).
 */
export class PassSlots {
  private inFlight = 0;
  private readonly waiting: { rank: number; start: () => void }[] = [];

  constructor(private readonly capacity: number) {}

  /** Resolves when a slot is this caller's; `release` it once its pass has answered. */
  async acquire(rank = 0): Promise<void> {
    if (this.inFlight < this.capacity) {
      this.inFlight += 1;
      return;
    }
    await new Promise<void>((start) => {
      const at = this.waiting.findIndex((w) => w.rank > rank);
      this.waiting.splice(at === -1 ? this.waiting.length : at, 0, { rank, start });
    });
  }

  /** Hands the slot to the next waiting pass, or frees it. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next.start();
    else this.inFlight -= 1;
  }
}

/**
 * Runs passes in the order they are asked for, PASSES_IN_FLIGHT at a time, counting usage (the
 * client checks each response's identity). After a failure no further pass is sent.
 */
export class PassRunner {
  inputTokens = 0;
  passes = 0;
  private failure: { error: unknown } | null = null;
  /** The logical input (usage.billable_input_tokens): the prefix once and each billed pass's rest; null once a billed pass had no prefix. */
  private billable: { prefix: number; rest: number } | null = { prefix: 0, rest: 0 };

  constructor(
    private readonly client: RuntimeClient,
    readonly fixed: ResolvedLabels,
    private readonly signal?: AbortSignal,
    /** Send each pass's prefix (the state), so the runtime evaluates it once; false evaluates every pass in full (a benchmark's baseline). */
    private readonly shared = true,
    /** The slots its passes take (its own PASSES_IN_FLIGHT by default), and its rank among their runners. */
    private readonly slots: PassSlots = new PassSlots(PASSES_IN_FLIGHT),
    private readonly rank = 0,
  ) {}

  /**
   * Each label's log-probability in one pass (its forms summed), in the pass's label order. `billed`:
   * the pass carries a question's own input (its first content pass, or a chunk of its options), so
   * its rest counts in the logical input.
   */
  async run(pass: Pass, words: ResolvedLabels | null, billed = false): Promise<number[]> {
    return (await this.send(pass, words, "none", billed)).logprobs;
  }

  /** The same, with the base's hidden state at the answer position (and with `pooled` the state's pooled one); always billed. */
  async runHidden(pass: Pass, words: ResolvedLabels | null, pooled = false): Promise<{ logprobs: number[]; hidden: number[]; pooled: number[] | null }> {
    const read = await this.send(pass, words, pooled ? "pooled" : "hidden", true);
    if (!read.hidden) throw new RuntimeError("the runtime returned no hidden state", 200, "malformed");
    if (pooled && !read.pooled) throw new RuntimeError("the runtime returned no pooled state", 200, "malformed");
    return { logprobs: read.logprobs, hidden: read.hidden, pooled: read.pooled ?? null };
  }

  /** The state's sentence embedding (not a pass: the runtime's encoder reads it beside the model). */
  embed(text: string): Promise<EmbedResponse> {
    if (this.failure) return Promise.reject(this.failure.error);
    this.signal?.throwIfAborted();
    return this.client.embed({ text }, this.signal);
  }

  /**
   * `input_tokens`: what the runtime evaluated (a kept prefix is not counted again); `output_tokens`:
   * one answer position per pass; `billable_input_tokens`: the state once and each question's own
   * input once, present when every billed pass had its prefix.
   */
  usage(): Usage {
    const billable = this.billable && this.billable.prefix > 0 ? { billable_input_tokens: this.billable.prefix + this.billable.rest } : {};
    return { input_tokens: this.inputTokens, output_tokens: this.passes, ...billable };
  }

  private async send(
    pass: Pass,
    words: ResolvedLabels | null,
    states: "none" | "hidden" | "pooled",
    billed: boolean,
  ): Promise<{ logprobs: number[]; hidden: number[] | undefined; pooled: number[] | undefined }> {
    await this.slots.acquire(this.rank);
    try {
      // Once the caller has given up, or a pass has failed, no further pass is sent.
      if (this.failure) throw this.failure.error;
      this.signal?.throwIfAborted();
      const groups = labelTokens(words ? new Map([...this.fixed, ...words]) : this.fixed, pass.labels);
      const prefix = this.shared && pass.prefixSegments > 0 ? { prefix_segments: pass.prefixSegments } : {};
      const asked = states === "none" ? {} : { hidden_state: true, ...(states === "pooled" && "prefix_segments" in prefix ? { pooled_state: true } : {}) };
      const response = await this.client.score({ segments: pass.segments, label_tokens: groups.flat(), ...prefix, ...asked }, this.signal);
      this.inputTokens += response.evaluated_tokens ?? response.prompt_tokens;
      this.passes += 1;
      if (billed) this.bill(response.prompt_tokens, response.prefix_tokens ?? 0);
      return { logprobs: labelLogprobs(response.logprobs, groups), hidden: response.hidden_state, pooled: response.pooled_state };
    } catch (err) {
      this.failure ??= { error: err };
      throw err;
    } finally {
      this.slots.release();
    }
  }

  private bill(promptTokens: number, prefixTokens: number): void {
    if (!this.billable) return;
    if (prefixTokens === 0) {
      this.billable = null;
      return;
    }
    // Every content pass of a request has the same prefix: the state, counted once.
    this.billable.prefix = prefixTokens;
    this.billable.rest += promptTokens - prefixTokens;
  }
}
