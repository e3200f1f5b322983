/**
 * The passes of one execution at the runtime, sent in groups (PassGroups: the passes asked for
 * together go as one `/v1/score-group` call), each response's identity checked against the runtime
 * the release names (identity.ts), with the execution's usage counted. A real-time execution's
 * passes have groups of their own; a bulk execution's records and training's examples share the
 * background's (bulk/records.ts BulkFlow), ranked so each record's passes go before the next's.
 * Served decisions (execute.ts), trained releases and training's examples (trained.ts) all run
 * their passes through it.
 *
 *     const runner = new PassRunner(client, runtime, admission.fixed, signal);
 *     const logprobs = await runner.run(pass, words, true);
 *     const { usage, passes } = { usage: runner.usage(), passes: runner.passes };
 */
import type { Usage } from "../../contract/decision.ts";
import { GROUP_PASSES_MAX, type EmbedResponse, type ScoreRequest, type ScoreResponse } from "../../server-shared/runtime-protocol.ts";
import { RuntimeError, type RuntimeClient } from "../runtime/client.ts";
import { checkStamp, type RuntimeIdentity } from "./identity.ts";
import { labelTokens, type ResolvedLabels } from "./labels.ts";
import { labelLogprobs } from "./readout.ts";
import { segmentsTokenBound, type Pass } from "./render.ts";

/** What one PassGroups sends at once: calls at the runtime, passes in a call, and the tokens of its calls together. */
export interface GroupLimits {
  /** Group calls at the runtime at once: the next group is read while one is evaluated. */
  calls: number;
  /** Passes in one call (at most GROUP_PASSES_MAX). */
  passes: number;
  /**
   * Tokens of every call at the runtime together, counted by their byte bound (render.ts
   * passTokenBound, never below the real count), each shared prefix once. A call alone may hold
   * one pass of any admitted length.
   */
  tokens: number;
  /** Real-time calls (runtime-protocol.ts `realtime`): the runtime takes each as one turn, before the background's waiting turns. */
  realtime?: boolean;
}

/** A real-time execution's passes: all of them in one call (two while a chunked choice's final pass follows its chunks). */
export const REALTIME_GROUPS: GroupLimits = { calls: 2, passes: GROUP_PASSES_MAX, tokens: Number.POSITIVE_INFINITY, realtime: true };

interface Waiting {
  client: RuntimeClient;
  request: ScoreRequest;
  rank: number;
  signal: AbortSignal | undefined;
  resolve: (response: ScoreResponse) => void;
  reject: (err: unknown) => void;
}

/**
 * Passes on their way to the runtime, sent as groups (runtime-protocol.ts `/v1/score-group`): the
 * passes asked for while the event loop turns go as one call, at most `limits.calls` calls at once,
 * so that the runtime evaluates their distinct prefixes once and their rests in one decode. Passes
 * of one client go together (a call has one runtime); the waiting pass of the lowest rank goes
 * first, the earliest asked among equals, so a bulk execution's records finish in their order. A
 * waiting pass whose caller gave up is dropped, never sent.
 */
export class PassGroups {
  private readonly waiting: Waiting[] = [];
  private calls = 0;
  private tokens = 0;
  private scheduled = false;

  constructor(readonly limits: GroupLimits) {}

  /** The pass's response (with the group's stamp), once its group has answered. */
  score(client: RuntimeClient, request: ScoreRequest, rank = 0, signal?: AbortSignal): Promise<ScoreResponse> {
    return new Promise<ScoreResponse>((resolve, reject) => {
      const at = this.waiting.findIndex((w) => w.rank > rank);
      this.waiting.splice(at === -1 ? this.waiting.length : at, 0, { client, request, rank, signal, resolve, reject });
      this.schedule();
    });
  }

  /** Sends once the callers' synchronous work is done, so that the passes they ask for together go together. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const w of [...this.waiting]) {
      if (!w.signal?.aborted) continue;
      this.waiting.splice(this.waiting.indexOf(w), 1);
      w.reject(w.signal.reason);
    }
    while (this.calls < this.limits.calls && this.waiting.length > 0) {
      const group = this.nextGroup();
      if (!group) return;
      this.send(group.passes, group.tokens);
    }
  }

  /** The next call's passes: the first waiting one, and those of its client after it that fit; null while the tokens at the runtime leave no room. */
  private nextGroup(): { passes: Waiting[]; tokens: number } | null {
    const client = this.waiting[0]!.client;
    const room = this.limits.tokens - this.tokens;
    const prefixes = new Set<string>();
    const passes: Waiting[] = [];
    let tokens = 0;
    for (const w of this.waiting) {
      if (w.client !== client) continue;
      if (passes.length === this.limits.passes) break;
      const { prefix, key, rest } = tokenBound(w.request);
      const added = rest + (prefixes.has(key) ? 0 : prefix);
      // The first pass goes alone when nothing else is at the runtime, whatever its length.
      if (tokens + added > room && !(passes.length === 0 && this.tokens === 0)) break;
      passes.push(w);
      prefixes.add(key);
      tokens += added;
    }
    if (passes.length === 0) return null;
    for (const w of passes) this.waiting.splice(this.waiting.indexOf(w), 1);
    return { passes, tokens };
  }

  private send(passes: Waiting[], tokens: number): void {
    this.calls += 1;
    this.tokens += tokens;
    // One caller's group (a real-time execution's) stops with it; a group of several callers' passes runs to its end.
    const signal = passes.every((w) => w.signal === passes[0]!.signal) ? passes[0]!.signal : undefined;
    passes[0]!.client
      .scoreGroup({ passes: passes.map((w) => w.request), ...(this.limits.realtime ? { realtime: true } : {}) }, signal)
      .then(
        ({ release_id, fingerprint, results }) => passes.forEach((w, i) => w.resolve({ release_id, fingerprint, ...results[i]! })),
        (err) => passes.forEach((w) => w.reject(err)),
      )
      .finally(() => {
        this.calls -= 1;
        this.tokens -= tokens;
        this.schedule();
      });
  }
}

/** A pass's token bound (render.ts passTokenBound) in two parts: its prefix (with what names it, so equal prefixes count once) and its rest. */
function tokenBound(request: ScoreRequest): { prefix: number; key: string; rest: number } {
  const count = request.prefix_segments ?? 0;
  const prefix = request.segments.slice(0, count);
  const key = `${request.prefix_owner ?? ""}\u0000${prefix.map((s) => s.text).join("\u0000")}`;
  return { prefix: segmentsTokenBound(prefix), key, rest: 1 + segmentsTokenBound(request.segments.slice(count)) };
}

/**
 * Slots for a bulk execution's records at the runtime (bulk/records.ts BulkFlow): at most `capacity`
 * held at once; a freed slot goes to the waiting caller of the lowest rank, the earliest asked among
 * equals.
 */
export class PassSlots {
  private inFlight = 0;
  private readonly waiting: { rank: number; start: () => void }[] = [];

  constructor(private readonly capacity: number) {}

  /** Resolves when a slot is this caller's; `release` it once done. */
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

  /** Hands the slot to the next waiting caller, or frees it. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next.start();
    else this.inFlight -= 1;
  }
}

/**
 * Runs an execution's passes through its groups, counting usage and checking each response's
 * identity. After a failure no further pass is sent: its passes still waiting are dropped.
 */
export class PassRunner {
  inputTokens = 0;
  passes = 0;
  private failure: { error: unknown } | null = null;
  /** The logical input (usage.billable_input_tokens): the prefix once and each billed pass's rest; null once a billed pass had no prefix. */
  private billable: { prefix: number; rest: number } | null = { prefix: 0, rest: 0 };
  /** Aborted by the caller's signal or by this runner's first failure. */
  private readonly stop = new AbortController();
  private readonly signal: AbortSignal;

  constructor(
    private readonly client: RuntimeClient,
    private readonly runtime: RuntimeIdentity,
    readonly fixed: ResolvedLabels,
    signal?: AbortSignal,
    /** Send each pass's prefix (the state), so the runtime evaluates it once; false evaluates every pass in full (a benchmark's baseline). */
    private readonly shared = true,
    /** The groups its passes go in (its own by default), and its rank among their runners. */
    private readonly place: { groups: PassGroups; rank: number } = { groups: new PassGroups(REALTIME_GROUPS), rank: 0 },
  ) {
    this.signal = signal ? AbortSignal.any([signal, this.stop.signal]) : this.stop.signal;
  }

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
  async embed(text: string): Promise<EmbedResponse> {
    if (this.failure) throw this.failure.error;
    this.signal.throwIfAborted();
    return checkStamp(this.runtime, await this.client.embed({ text }, this.signal));
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
    try {
      // Once the caller has given up, or a pass has failed, no further pass is sent.
      if (this.failure) throw this.failure.error;
      this.signal.throwIfAborted();
      const groups = labelTokens(words ? new Map([...this.fixed, ...words]) : this.fixed, pass.labels);
      const prefix = this.shared && pass.prefixSegments > 0 ? { prefix_segments: pass.prefixSegments } : {};
      const asked = states === "none" ? {} : { hidden_state: true, ...(states === "pooled" && "prefix_segments" in prefix ? { pooled_state: true } : {}) };
      const request: ScoreRequest = { segments: pass.segments, label_tokens: groups.flat(), ...prefix, ...asked };
      const response: ScoreResponse = checkStamp(this.runtime, await this.place.groups.score(this.client, request, this.place.rank, this.signal));
      this.inputTokens += response.evaluated_tokens ?? response.prompt_tokens;
      this.passes += 1;
      if (billed) this.bill(response.prompt_tokens, response.prefix_tokens ?? 0);
      return { logprobs: labelLogprobs(response.logprobs, groups), hidden: response.hidden_state, pooled: response.pooled_state };
    } catch (err) {
      if (!this.failure) {
        this.failure = { error: err };
        this.stop.abort(err);
      }
      throw this.failure.error;
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
