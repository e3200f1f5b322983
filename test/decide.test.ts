/**
 * The sidecar's execution of decisions (sidecar/decide/) against the real runtime process serving the
 * real default model (Gemma 3 270M), started under Bun as test/runtime.test.ts does. Calls are
 * watched through `CountingRuntime`, which forwards every call to that runtime unchanged.
 *
 * Fakes stand only for faults the real runtime cannot show on demand, and say so in their names:
 * `WrongFingerprintRuntime` (a runtime that answers as another release), `MultiTokenLabelRuntime`
 * and `SharedTokenLabelRuntime` (a model whose tokenizer breaks the labels).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Answer, Question, type ChoiceAnswer, type NoulAnswer, type ScoreAnswer } from "../contract/decision.ts";
import { Decision } from "../server-shared/sidecar-protocol.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { LIMITS } from "../contract/limits.ts";
import { CONTENT_FREE_STATE, FIXED_FORMS, OPTIONS_PER_PASS, SERVED_RENDERING, passTokenBound, planQuestion, asText } from "../sidecar/decide/render.ts";
import type { EmbedRequest, EmbedResponse, Identity, ScoreGroupRequest, ScoreGroupResponse, ScoreRequest, ScoreResponse, Tokenized, TokenizeRequest, TokenizeResponse } from "../server-shared/runtime-protocol.ts";
import { ensureModel } from "../local/model.ts";
import { ensureTextEncoder } from "../local/text-encoder.ts";
import { stringifyJson } from "../contract/json.ts";
import { trainedFingerprint, type HeadParams, type TrainedHeads } from "../server-shared/trained.ts";
import { splitReads, headInput } from "../sidecar/train/features.ts";
import { trainHead } from "../sidecar/train/head.ts";
import { animalSentences } from "./support/training.ts";
import type { Child } from "../local/process.ts";
import { executeDecision } from "../sidecar/decide/execute.ts";
import { SERVED_STEPS, type Steps } from "../sidecar/decide/steps.ts";
import { PassGroups } from "../sidecar/decide/passes.ts";
import { exampleFeatures } from "../sidecar/decide/trained.ts";
import { IdentityMismatchError, type Release } from "../sidecar/decide/identity.ts";
import { checkFixedForms, LabelError, labelCache, wordCache } from "../sidecar/decide/labels.ts";
import { contentFreeReadings } from "../sidecar/decide/content-free.ts";
import { chunkProbabilities, labelLogprobs, mergeChunks, selectFinalists } from "../sidecar/decide/readout.ts";
import { HttpRuntimeClient, ownedBy, type RuntimeClient } from "../sidecar/runtime/client.ts";
import { startRuntime } from "../local/tiers.ts";


let workDir: string;
let runtime: Child;
let real: HttpRuntimeClient;
let release: Release;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "decide-test-"));
  const model = await ensureModel();
  const secret = randomBytes(32).toString("hex");
  const started = await startRuntime({ name: "runtime", modelPath: model.path, encoderPath: (await ensureTextEncoder()).path, secret, logDir: workDir });
  runtime = started.child;
  real = new HttpRuntimeClient(started.url, secret);
  release = { id: started.ready.release_id, fingerprint: started.ready.fingerprint };
});

afterAll(async () => {
  await runtime?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

beforeEach(() => {
  labelCache.clear();
  wordCache.clear();
  contentFreeReadings.clear();
});

/** One text on the real runtime. */
async function tokenizeOne(text: string, special = false): Promise<Tokenized> {
  return (await real.tokenize({ texts: [{ text, special }] })).results[0]!;
}

/** Forwards every call to the real runtime and records it; optionally runs a hook after each score. */
class CountingRuntime implements RuntimeClient {
  readonly tokenized: TokenizeRequest[] = [];
  readonly scored: { request: ScoreRequest; response: ScoreResponse }[] = [];
  private answered = 0;
  private inFlight = 0;
  /** The most passes sent and not yet answered at one time. */
  maxInFlight = 0;

  constructor(
    private readonly inner: RuntimeClient,
    private readonly afterScore: (count: number) => void = () => undefined,
  ) {}

  identity(signal?: AbortSignal): Promise<Identity> {
    return this.inner.identity(signal);
  }

  embed(request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResponse> {
    return this.inner.embed(request, signal);
  }

  tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    this.tokenized.push(request);
    return this.inner.tokenize(request, signal);
  }

  /** Each group call's passes, in the order sent. */
  readonly groups: ScoreRequest[][] = [];

  /** Each pass recorded in `scored`, in the order sent; the hook runs after each of its passes once the group answers. */
  async scoreGroup(request: ScoreGroupRequest, signal?: AbortSignal): Promise<ScoreGroupResponse> {
    const calls = request.passes.map((pass) => ({ request: pass }) as { request: ScoreRequest; response: ScoreResponse });
    this.scored.push(...calls);
    this.groups.push(request.passes);
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    let response: ScoreGroupResponse;
    try {
      response = await this.inner.scoreGroup(request, signal);
    } finally {
      this.inFlight -= 1;
    }
    const { release_id, fingerprint } = response;
    response.results.forEach((result, i) => (calls[i]!.response = { release_id, fingerprint, ...result }));
    for (const _ of calls) this.afterScore(++this.answered);
    return response;
  }

  /** Recorded in the order the passes are sent (several may be in flight). */
  async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResponse> {
    const call = { request } as { request: ScoreRequest; response: ScoreResponse };
    this.scored.push(call);
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    try {
      call.response = await this.inner.score(request, signal);
    } finally {
      this.inFlight -= 1;
    }
    this.afterScore(++this.answered);
    return call.response;
  }
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

const STATE = { ticket: "I was charged twice for my March invoice and I want the second charge refunded.", customer: { plan: "pro" } };
const MIXED = {
  state: STATE,
  questions: {
    refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
    kind: { type: "choice", instructions: "What is the ticket about?", criteria: { billing: "money, invoices, charges", bug: "a defect in the product", other: null } },
    severity: { type: "score", criteria: ["none", "low", { level: "medium", respond_within_hours: 24 }, "high", "critical"] },
  },
} as const;
const mixed = () => MIXED;

/** The served plan of a question written as a plain object. */
const plan = (state: string, question: unknown) =>
  planQuestion(SERVED_RENDERING, state, Question.parse(question), { words: false, contextual: true, bothOrders: true });

/** Executes a request written as a plain object, read through the contract as the sidecar reads it. */
const run = (client: RuntimeClient, rel: Release, request: unknown, signal?: AbortSignal, steps?: Steps) =>
  executeDecision(client, rel, Decision.parse(request), signal, steps);

/** A choice of n options with short names, so that its chunk passes stay cheap on a CPU. */
function manyOptions(n: number): Record<string, string | null> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`c${i}`, i % 5 === 0 ? `tickets of kind ${i}` : null]));
}

async function refusal(run: Promise<unknown>): Promise<ServiceError> {
  const err = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  const refused = err as ServiceError;
  expect(refused.status).toBe(422);
  expect(refused.code).toBe("invalid_request");
  return refused;
}

describe("labels", () => {
  it("resolve to single tokens of Gemma that decode to themselves, all distinct", async () => {
    const labels = checkFixedForms((await real.tokenize({ texts: FIXED_FORMS.map((text) => ({ text, special: false })) })).results);
    const tokens = FIXED_FORMS.map((form) => labels.get(form));
    for (const [i, form] of FIXED_FORMS.entries()) {
      expect(await tokenizeOne(form)).toEqual({ tokens: [tokens[i]], pieces: [form] });
    }
    expect(new Set(tokens).size).toBe(FIXED_FORMS.length);
  });

  it("are tokenized once per fingerprint: a request with nothing new to learn makes no tokenize call", async () => {
    const counting = new CountingRuntime(real);
    const request = { state: "The sky is blue.", questions: { q: { type: "noul" as const } } };
    const first = await run(counting, release, request);
    expect(labelCache.get(release.fingerprint)?.tokensPerPass).toBe(LIMITS.tokensPerPass);
    const second = await run(counting, release, request);
    expect(counting.tokenized.map((call) => call.texts.map((t) => t.text))).toEqual([[...FIXED_FORMS]]);
    expect(second.answers).toEqual(first.answers);
  });

  it("tokenize a choice's option names once per fingerprint: the same question again tokenizes nothing", async () => {
    const counting = new CountingRuntime(real);
    const request = { state: "Paris", questions: { where: { type: "choice" as const, criteria: { Europe: null, Asia: null } } } };
    const first = await run(counting, release, request);
    expect(counting.tokenized).toHaveLength(1);
    expect(counting.tokenized[0]!.texts.map((t) => t.text)).toEqual([...FIXED_FORMS, " Europe", " Asia"]);
    const second = await run(counting, release, request);
    expect(counting.tokenized.map((call) => call.texts.length)).toEqual([FIXED_FORMS.length + 2]);
    expect(second.answers).toEqual(first.answers);
  });

  it("refuse a model whose label is several tokens (LabelError, no pass run)", async () => {
    const counting = new CountingRuntime(new MultiTokenLabelRuntime(real, "Yes"));
    const err = await run(counting, release, mixed()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LabelError);
    expect(err).toMatchObject({ status: 503, code: "unavailable", operatorNote: expect.stringContaining('"Yes"') });
    expect(counting.scored).toHaveLength(0);
  });

  it("refuse a model on which two labels share a token", async () => {
    const counting = new CountingRuntime(new SharedTokenLabelRuntime(real, "B", "A"));
    await expect(run(counting, release, mixed())).rejects.toMatchObject({ problem: expect.stringMatching(/labels "A" and "B" share token/) });
    expect(counting.scored).toHaveLength(0);
    expect(labelCache.has(release.fingerprint)).toBe(false);
  });
});

describe("a decision", () => {
  it("answers a noul, a 3-option choice and a 5-level score in request order, with usage", async () => {
    const counting = new CountingRuntime(real);
    const result = await run(counting, release, mixed());

    expect([...result.answers.keys()]).toEqual(["refund", "kind", "severity"]);
    for (const answer of result.answers.values()) expect(Answer.parse(answer)).toEqual(answer);
    const { refund, kind, severity } = Object.fromEntries(result.answers) as { refund: Answer; kind: ChoiceAnswer; severity: ScoreAnswer };
    expect(Object.keys(refund)).toEqual(["type", "noul", "option_mass"]);
    expect([...kind.probabilities.keys()]).toEqual(["billing", "bug", "other"]);
    expect(sum([...kind.probabilities.values()])).toBeCloseTo(1, 12);
    expect(kind.probabilities.get(kind.choice)).toBe(Math.max(...kind.probabilities.values()));
    expect(Object.fromEntries(severity.legend)).toEqual({ "0": "none", "1": "low", "2": { level: "medium", respond_within_hours: 24 }, "3": "high", "4": "critical" });
    expect([...severity.probabilities.keys()]).toEqual(["0", "1", "2", "3", "4"]);
    expect(sum([...severity.probabilities.values()])).toBeCloseTo(1, 12);
    expect(severity.score).toBeGreaterThanOrEqual(0);
    expect(severity.score).toBeLessThanOrEqual(4);

    // Every question's passes about the content-free state (none kept yet), then every question's
    // passes about the state, in request order: Yes/No in four forms each; the options' own words, in
    // key order and then reversed (a choice's options have no order); five digits (a level is
    // structured JSON, so levels cannot be read by their words).
    expect(counting.scored.map((s) => s.request.label_tokens.length)).toEqual([8, 3, 3, 5, 8, 3, 3, 5]);
    const texts = counting.scored.map((s) => s.request.segments.map((g) => g.text).join(""));
    expect(texts.map((t) => t.includes("State:\nN/A\n"))).toEqual([true, true, true, true, false, false, false, false]);
    // The state is each pass's prefix, its own segment.
    for (const { request } of counting.scored) expect(request.prefix_segments).toBe(1);
    expect(texts[5]).toContain("- billing: money, invoices, charges\n- bug: a defect in the product\n- other\n");
    expect(texts[6]).toContain("- other\n- bug: a defect in the product\n- billing: money, invoices, charges\n");
    expect(result.passes).toBe(8);
    // What the runtime evaluated (each prefix once), and the logical input: the state once and each
    // question's own tokens once (the reversed reading repeats the choice's).
    const [free, content] = [counting.scored.slice(0, 4), counting.scored.slice(4)];
    const prefix = content[0]!.response.prefix_tokens!;
    expect(prefix).toBeGreaterThan(0);
    expect(result.usage).toEqual({
      input_tokens: sum(counting.scored.map((s) => s.response.evaluated_tokens!)),
      output_tokens: 8,
      billable_input_tokens: prefix + sum([content[0]!, content[1]!, content[3]!].map((s) => s.response.prompt_tokens - prefix)),
    });
    // Within each group one pass at most evaluates the shared prefix (none, when the runtime still
    // held it from the pass before); the others evaluate their own tokens only.
    for (const group of [content, free]) {
      for (const { response } of group) expect([response.prompt_tokens, response.prompt_tokens - response.prefix_tokens!]).toContain(response.evaluated_tokens);
      expect(group.filter((s) => s.response.evaluated_tokens === s.response.prompt_tokens).length).toBeLessThanOrEqual(1);
    }
  });

  it("divides out the question's prior: about the content-free state itself, every answer is even", async () => {
    // The content pass and the content-free pass are the same prompt, so the correction leaves nothing.
    const result = await run(real, release, { ...MIXED, state: CONTENT_FREE_STATE });
    const { refund, kind, severity } = Object.fromEntries(result.answers) as { refund: NoulAnswer; kind: ChoiceAnswer; severity: ScoreAnswer };
    expect(refund.noul).toBeCloseTo(0.5, 12);
    for (const p of kind.probabilities.values()) expect(p).toBeCloseTo(1 / 3, 12);
    for (const p of severity.probabilities.values()) expect(p).toBeCloseTo(1 / 5, 12);
    // Without the steps the model's own prior shows, and each question is read once.
    const raw = await run(real, release, { ...MIXED, state: CONTENT_FREE_STATE }, undefined, { ...SERVED_STEPS, contextual: false, bothOrders: false });
    expect((raw.answers.get("refund") as NoulAnswer).noul).not.toBeCloseTo(0.5, 6);
    expect([...(raw.answers.get("kind") as ChoiceAnswer).probabilities.values()][0]).not.toBeCloseTo(1 / 3, 6);
    expect(raw.passes).toBe(3);
  });

  it("reads options by their own first words when those differ, and by letters when two share one", async () => {
    const counting = new CountingRuntime(real);
    const distinct = { type: "choice", instructions: "Which continent is it in?", criteria: { Europe: null, Asia: null, Africa: null } };
    const shared = { type: "choice", instructions: "Which country is it?", criteria: { "North Korea": null, "North Macedonia": null, Chad: null } };
    const result = await run(counting, release, { state: "Paris", questions: { distinct, shared } });
    // Both questions' passes about the state (each in key order, then reversed), then their content-free passes.
    const [words, wordsReversed, letters, lettersReversed] = counting.scored.map((s) => s.request);
    expect(words!.label_tokens).toEqual(await Promise.all([" Europe", " Asia", " Africa"].map(async (w) => (await tokenizeOne(w)).tokens[0])));
    expect(words!.segments[1]!.text).toContain("Options:\n- Europe\n- Asia\n- Africa\nAnswer:");
    // Letters, each in two forms (" A" and "A").
    expect(letters!.label_tokens).toHaveLength(6);
    expect(letters!.segments[1]!.text).toContain("A: North Korea\nB: North Macedonia\nC: Chad\nAnswer:");
    // The second readings offer the options reversed, letters given by position.
    expect(wordsReversed!.segments[1]!.text).toContain("Options:\n- Africa\n- Asia\n- Europe\nAnswer:");
    expect(lettersReversed!.segments[1]!.text).toContain("A: Chad\nB: North Macedonia\nC: North Korea\nAnswer:");
    expect([...(result.answers.get("shared") as ChoiceAnswer).probabilities.keys()]).toEqual(["North Korea", "North Macedonia", "Chad"]);
  });

  it("answers a two-option choice the same whichever order its options are given in (both orders are read)", async () => {
    const ask = (criteria: Record<string, null>) => run(real, release, { state: "wonderful", questions: { q: { type: "choice", criteria } } });
    const forward = (await ask({ positive: null, negative: null })).answers.get("q") as ChoiceAnswer;
    const backward = (await ask({ negative: null, positive: null })).answers.get("q") as ChoiceAnswer;
    expect([...backward.probabilities.keys()]).toEqual(["negative", "positive"]);
    expect(backward.probabilities.get("positive")).toBe(forward.probabilities.get("positive"));
    expect(backward.choice).toBe(forward.choice);
  });

  it("gives identical numbers for the same request", async () => {
    const first = await run(real, release, mixed());
    const second = await run(real, release, mixed());
    expect(second.answers).toEqual(first.answers);
    // The second finds the content-free readings kept.
    expect(second.passes).toBe(first.passes - 4);
  });

  it("evaluates the state once: a request's passes after the first evaluate only their own tokens, and answer as each pass alone would", async () => {
    // Every question type, a choice read by words and one by letters, and a chunked choice.
    const request = {
      state: { ticket: "The card was charged twice for the March invoice; please refund the second charge. ".repeat(3), customer: { plan: "pro" } },
      questions: {
        ...MIXED.questions,
        letters: { type: "choice", criteria: { "North Korea": null, "North Macedonia": null, Chad: null } },
        many: { type: "choice", instructions: "Which queue?", criteria: manyOptions(28) },
      },
    };
    const counting = new CountingRuntime(real);
    const shared = await run(counting, release, request);
    const content = counting.scored.filter((s) => !s.request.segments[0]!.text.startsWith("State:\nN/A\n"));
    const prefix = content[0]!.response.prefix_tokens!;
    // The state is evaluated by one pass (the first to reach the runtime: two are in flight at once, so
    // it need not be the first sent); every other content pass evaluates its own tokens only.
    expect(content.filter((s) => s.response.evaluated_tokens === s.response.prompt_tokens)).toHaveLength(1);
    for (const { response } of content) {
      expect(response.prefix_tokens).toBe(prefix);
      expect([response.prompt_tokens, response.prompt_tokens - prefix]).toContain(response.evaluated_tokens);
    }
    // Each pass with its prefix evaluated anew (another prefix runs before it): the same numbers.
    contentFreeReadings.clear();
    const evicting = new CountingRuntime(new EvictingPrefixRuntime(real));
    const alone = await run(evicting, release, request);
    for (const { response } of evicting.scored) expect(response.evaluated_tokens).toBe(response.prompt_tokens);
    expect(alone.passes).toBe(shared.passes);
    expect(sum(evicting.scored.map((s) => s.response.evaluated_tokens!))).toBeGreaterThan(shared.usage.input_tokens);
    expect(alone.answers).toEqual(shared.answers);
  }, 180_000);

  it("keeps content-free readings per runtime: a question asked again runs its content pass only, with the same numbers", async () => {
    const first = new CountingRuntime(real);
    const computed = await run(first, release, mixed());
    expect(first.scored).toHaveLength(8);
    const again = new CountingRuntime(real);
    const kept = await run(again, release, mixed());
    // Four content passes (the choice's two orders); the content-free readings come from the store.
    expect(again.scored).toHaveLength(4);
    expect(again.scored.every((s) => !s.request.segments[0]!.text.startsWith("State:\nN/A\n"))).toBe(true);
    expect(kept.answers).toEqual(computed.answers);
    expect(kept.passes).toBe(4);
    expect(kept.usage.output_tokens).toBe(4);
    expect(kept.usage.input_tokens).toBe(sum(again.scored.map((s) => s.response.evaluated_tokens!)));
    // The same questions about another state: still one pass per question and option order.
    const other = new CountingRuntime(real);
    await run(other, release, { ...mixed(), state: "The app crashes when I open the settings page." });
    expect(other.scored).toHaveLength(4);
    expect(contentFreeReadings.count).toBe(4);
  });

  it("keeps a state's evaluation for the account that sent it: another account's identical state is evaluated again", async () => {
    const state = `A kept prefix is an account's own ${randomBytes(4).toString("hex")}: the same words from another account are evaluated again.`;
    const ask = { ...mixed(), state };
    const statePasses = (counting: CountingRuntime) => counting.scored.filter((s) => !s.request.segments[0]!.text.startsWith("State:\nN/A\n"));
    const as = async (account: string) => {
      const counting = new CountingRuntime(real);
      await run(ownedBy(counting, account), release, ask);
      return statePasses(counting);
    };
    await as("account-a"); // the content-free readings kept (their passes run first; the state, last, stays kept)
    await as("account-a"); // the state evaluated once, and kept for account a
    const a = await as("account-a");
    const b = await as("account-b");
    // Account a's state is still the runtime's kept prefix: its passes evaluate their own tokens only.
    expect(a.every((s) => s.response.evaluated_tokens! < s.response.prompt_tokens)).toBe(true);
    // Account b sent the same words, to the same runtime, right after: its first pass evaluates the state again.
    expect(b.filter((s) => s.response.evaluated_tokens === s.response.prompt_tokens)).toHaveLength(1);
    expect(new Set(b.map((s) => s.request.prefix_owner)).size).toBe(1);
    expect(b[0]!.request.prefix_owner).not.toBe(a[0]!.request.prefix_owner);
    expect(b[0]!.request.prefix_owner).not.toContain("account-b");
  });

  it("evaluates every pass in full without sharing (the benchmarks' baseline), keeping nothing", async () => {
    const counting = new CountingRuntime(real);
    const result = await run(counting, release, mixed(), undefined, { ...SERVED_STEPS, shared: false });
    expect(counting.scored).toHaveLength(8);
    for (const { request, response } of counting.scored) {
      expect(request.prefix_segments).toBeUndefined();
      expect(response.evaluated_tokens).toBe(response.prompt_tokens);
    }
    expect(result.usage).toEqual({ input_tokens: sum(counting.scored.map((s) => s.response.prompt_tokens)), output_tokens: 8 });
    expect(contentFreeReadings.count).toBe(0);
  });

  it("sends a request's passes as one group: every question's content passes and the content-free ones not kept", async () => {
    const counting = new CountingRuntime(real);
    const result = await run(counting, release, mixed());
    expect(result.passes).toBe(8);
    expect(counting.groups.map((g) => g.length)).toEqual([8]);
    // The content-free passes first, then the content passes in request order (the state stays kept).
    const free = counting.groups[0]!.map((p) => p.segments[0]!.text.startsWith("State:\nN/A\n"));
    expect(free).toEqual([true, true, true, true, false, false, false, false]);
    // A chunked choice: its chunks with the other passes, its final pass in a second group.
    const chunked = new CountingRuntime(real);
    await run(chunked, release, { state: STATE, questions: { ...MIXED.questions, many: { type: "choice", criteria: manyOptions(28) } } });
    expect(chunked.groups).toHaveLength(2);
    expect(chunked.groups[1]).toHaveLength(1);
    expect(chunked.maxInFlight).toBe(1);
  });

  it("counts the same usage and gives the same answers whether its passes go in one group or one a call", async () => {
    const request = { state: `${STATE.ticket} ${randomBytes(4).toString("hex")}`, questions: { ...MIXED.questions, many: { type: "choice", criteria: manyOptions(28) } } };
    const onePass = new CountingRuntime(real);
    const alone = await executeDecision(onePass, release, Decision.parse(request), undefined, SERVED_STEPS, { groups: new PassGroups({ calls: 2, passes: 1, tokens: Infinity }), rank: 0 });
    expect(onePass.groups.every((g) => g.length === 1)).toBe(true);
    // The same state again, from another account: nothing of it kept, every content-free reading kept.
    contentFreeReadings.clear();
    const grouped = new CountingRuntime(real);
    const together = await run(ownedBy(grouped, "another account"), release, request);
    expect(grouped.groups).toHaveLength(2);
    expect(together.usage).toEqual(alone.usage);
    expect(together.passes).toBe(alone.passes);
    expect(together.answers).toEqual(alone.answers);
  });

  it("sends no further group once the signal is aborted (the one already in flight aside), and runs nothing when it already is", async () => {
    const controller = new AbortController();
    const counting = new CountingRuntime(real, () => controller.abort());
    const chunked = { state: STATE, questions: { many: { type: "choice" as const, criteria: manyOptions(28) } } };
    await expect(run(counting, release, chunked, controller.signal)).rejects.toMatchObject({ name: "AbortError" });
    // Aborted when the chunks' group answered: the final pass was never sent.
    expect(counting.groups).toHaveLength(1);
    expect(counting.scored).toHaveLength(counting.groups[0]!.length);

    const idle = new CountingRuntime(real);
    await expect(run(idle, release, mixed(), AbortSignal.abort())).rejects.toMatchObject({ name: "AbortError" });
    expect(idle.scored).toHaveLength(0);
  });
});

describe("a 255-option choice", () => {
  it("runs ceil(255/26) = 10 chunk passes and at most one final pass, and answers every option", async () => {
    const counting = new CountingRuntime(real);
    const criteria = manyOptions(LIMITS.choiceOptions.max);
    const names = Object.keys(criteria);
    const started = performance.now();
    const result = await run(counting, release, { state: STATE, questions: { topic: { type: "choice", criteria } } });
    const seconds = (performance.now() - started) / 1000;
    console.info(`255-option choice: ${result.passes} passes, ${result.usage.input_tokens} input tokens, ${seconds.toFixed(2)} s`);

    const chunks = counting.scored.slice(0, 10);
    // Each option's letter is read in two forms, " A" and "A".
    expect(chunks.map((s) => s.request.label_tokens.length)).toEqual([52, 52, 52, 52, 52, 52, 52, 52, 52, 42]);
    expect(counting.scored.length).toBeLessThanOrEqual(11);
    expect(result.passes).toBe(counting.scored.length);
    // The state is evaluated once; the chunks are the question's own input, the final pass is not.
    const prefix = chunks[0]!.response.prefix_tokens!;
    expect(result.usage).toEqual({
      input_tokens: sum(counting.scored.map((s) => s.response.evaluated_tokens!)),
      output_tokens: result.passes,
      billable_input_tokens: prefix + sum(chunks.map((s) => s.response.prompt_tokens - prefix)),
    });

    const answer = Answer.parse(result.answers.get("topic")) as ChoiceAnswer;
    expect([...answer.probabilities.keys()]).toEqual(names);
    expect(sum([...answer.probabilities.values()])).toBeCloseTo(1, 9);

    // The answer is the readout's merge of exactly these passes: a final pass over the finalists
    // (when there are several), whose mass it shares out; everyone else keeps p_chunk.
    const pairs = (lps: number[]) => labelLogprobs(lps, Array.from({ length: lps.length / 2 }, (_, i) => [2 * i, 2 * i + 1]));
    const pChunk = chunkProbabilities(chunks.map((s) => pairs(s.response.logprobs)));
    const finalists = selectFinalists(names, pChunk);
    expect(finalists.length).toBeLessThanOrEqual(OPTIONS_PER_PASS);
    const final = finalists.length > 1 ? counting.scored[10]! : null;
    expect(counting.scored).toHaveLength(final ? 11 : 10);
    expect(final?.request.label_tokens.length ?? 2).toBe(2 * finalists.length);
    const pFinal = mergeChunks(names, pChunk, finalists, final ? pairs(final.response.logprobs) : null);
    expect([...answer.probabilities.values()]).toEqual(pFinal);
    names.forEach((name, i) => {
      if (!finalists.includes(name)) expect(answer.probabilities.get(name)).toBeCloseTo(pChunk[i]!, 12);
    });
  });
});

describe("admission", () => {
  it("refuses a pass over 4,096 tokens (counted exactly) with 422 naming the question, before any pass", async () => {
    const counting = new CountingRuntime(real);
    const state = "lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(600);
    const question = { type: "noul" as const, instructions: "Is it Latin?" };
    const refused = await refusal(run(counting, release, { state, questions: { q7: question } }));

    const [pass] = plan(state, question).readings.map((r) => r.pass);
    let exact = 1;
    for (const s of pass!.segments) exact += (await tokenizeOne(s.text, s.special)).tokens.length;
    expect(exact).toBeGreaterThan(LIMITS.tokensPerPass);
    expect(refused.message).toBe(`questions.q7: a pass of this question needs ${exact} tokens; at most ${LIMITS.tokensPerPass} per pass`);
    expect(counting.scored).toHaveLength(0);
  });

  it("holds passes to the runtime's published per-pass limit when it is below the spec's", async () => {
    const counting = new CountingRuntime(real);
    const question = { type: "noul" as const, instructions: "Is it short?" };
    const state = "a short state that still renders to well over one hundred and twenty-eight bytes of prompt";
    const refused = await refusal(run(new SmallPassRuntime(counting, 16), release, { state, questions: { small: question } }));
    expect(refused.message).toMatch(/^questions\.small: a pass of this question needs \d+ tokens; at most 16 per pass$/);
    expect(counting.scored).toHaveLength(0);
  });

  it("refuses a later question's long pass before the first question runs", async () => {
    const counting = new CountingRuntime(real);
    const questions = {
      q1: { type: "noul" as const, instructions: "Is the sky blue?" },
      q7: { type: "score" as const, instructions: "How often does the word amet occur? ".repeat(1000), criteria: ["never", "often"] },
    };
    const refused = await refusal(run(counting, release, { state: "Lorem ipsum.", questions }));
    expect(refused.message).toMatch(/^questions\.q7: a pass of this question needs \d+ tokens; at most 4096 per pass$/);
    expect(counting.scored).toHaveLength(0);
  });

  it("counts every long pass of a request with one more tokenize call, each distinct segment once", async () => {
    const counting = new CountingRuntime(real);
    const state = "lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(600);
    const latin = { type: "noul" as const, instructions: "Is it Latin?" };
    const questions = { q1: latin, q2: latin, q3: { type: "noul" as const, instructions: "Is it English?" } };
    await refusal(run(counting, release, { state, questions }));
    expect(counting.tokenized).toHaveLength(2);
    // Three long passes (the content-free ones are short), two of them the same: their one prefix
    // (the state) and their two distinct rests.
    const texts = counting.tokenized[1]!.texts.map((t) => t.text);
    expect(texts).toHaveLength(3);
    expect(texts.filter((text) => text.includes(state))).toHaveLength(1);
  });

  it("admits a pass whose byte bound is over the limit when its exact count is not", async () => {
    const counting = new CountingRuntime(real);
    // Gemma reads a long run of spaces as few tokens: about 4,200 bytes, under 200 tokens.
    const state = `Ticket:${" ".repeat(4200)}refund please`;
    const question = { type: "noul" as const, instructions: "Does the ticket ask for a refund?" };
    expect(passTokenBound(plan(asText(state), question).readings[0]!.pass)).toBeGreaterThan(LIMITS.tokensPerPass);
    const result = await run(counting, release, { state, questions: { q: question } });
    expect(Answer.parse(result.answers.get("q")).type).toBe("noul");
    expect(counting.tokenized.length).toBeGreaterThan(0);
    expect(result.usage.input_tokens).toBeLessThan(LIMITS.tokensPerPass);
  });

  it("refuses a chunked choice whose final pass's byte bound is over the limit, though every chunk fits", async () => {
    const counting = new CountingRuntime(real);
    // Two chunks of 26, each with 13 long descriptions: each chunk fits, the 26 longest together do not.
    const long = "a description that goes on and on about this option in great detail, ".repeat(3);
    const criteria = Object.fromEntries(Array.from({ length: 52 }, (_, i) => [`o${i}`, i % 26 < 13 ? long : null]));
    const question = { type: "choice" as const, criteria };
    const big = plan("A ticket.", question);
    expect(big.chunks.map(passTokenBound).every((bound) => bound <= LIMITS.tokensPerPass)).toBe(true);
    expect(big.finalPassBound).toBeGreaterThan(LIMITS.tokensPerPass);

    const refused = await refusal(run(counting, release, { state: "A ticket.", questions: { big: question } }));
    expect(refused.message).toContain(`questions.big: the final pass of this choice may need up to ${big.finalPassBound} tokens`);
    expect(counting.scored).toHaveLength(0);
  });
});

describe("runtime identity", () => {
  it("fails admission with IdentityMismatchError when the tokenize call comes back from another fingerprint: no pass, nothing kept", async () => {
    const wrong = new CountingRuntime(new WrongStampRuntime(real));
    const choice = { state: "Paris", questions: { where: { type: "choice" as const, criteria: { Europe: null, Asia: null } } } };
    const err = await run(wrong, release, choice).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdentityMismatchError);
    expect(err).toMatchObject({ status: 503, code: "identity_mismatch", release, actual: { release_id: release.id, fingerprint: "0".repeat(64) } });
    expect(wrong.scored).toHaveLength(0);
    // Labels and option words read from a runtime that is another release are not kept.
    expect(labelCache.has(release.fingerprint)).toBe(false);
    expect(wordCache.size).toBe(0);
  });

  it("fails a decision that makes no tokenize call (labels known) at its first pass when the runtime is another fingerprint", async () => {
    const request = { state: "Paris", questions: { where: { type: "choice" as const, criteria: { Europe: null, Asia: null } } } };
    await run(real, release, request);
    const wrong = new CountingRuntime(new WrongFingerprintRuntime(real, 1));
    const err = await run(wrong, release, request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdentityMismatchError);
    expect(wrong.tokenized).toHaveLength(0);
    // Its two content passes (both option orders, in one group; the content-free readings were kept
    // by the first request): the group's stamp is refused.
    expect(wrong.groups.map((g) => g.length)).toEqual([2]);
  });

  it("fails the decision with IdentityMismatchError when a group comes back from another fingerprint", async () => {
    const wrong = new CountingRuntime(new WrongFingerprintRuntime(real, 1));
    const err = await run(wrong, release, mixed()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdentityMismatchError);
    expect(err).toMatchObject({ status: 503, release, actual: { release_id: release.id, fingerprint: "0".repeat(64) } });
    expect(wrong.groups).toHaveLength(1);
  });

  it("checks every group, not only the first", async () => {
    const wrong = new CountingRuntime(new WrongFingerprintRuntime(real, 2));
    const chunked = { state: STATE, questions: { many: { type: "choice" as const, criteria: manyOptions(28) } } };
    await expect(run(wrong, release, chunked)).rejects.toBeInstanceOf(IdentityMismatchError);
    // The chunks' group was answered as the release; the final pass's group was not.
    expect(wrong.groups.map((g) => g.length)).toEqual([wrong.groups[0]!.length, 1]);
  });
});

// ---------------------------------------------------------------------------------------------------

/**
 * The real runtime, made to evaluate every pass's prefix anew: before each pass it runs one with
 * another prefix, so nothing of the pass is kept (what a request's passes would see if other work
 * ran between them). Only the pass asked for is returned.
 */
class EvictingPrefixRuntime implements RuntimeClient {
  constructor(private readonly inner: RuntimeClient) {}

  identity(signal?: AbortSignal): Promise<Identity> {
    return this.inner.identity(signal);
  }

  embed(request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResponse> {
    return this.inner.embed(request, signal);
  }

  tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    return this.inner.tokenize(request, signal);
  }

  /** The pair of passes before this one: each pair runs alone, so no pass follows its own prefix. */
  private last: Promise<unknown> = Promise.resolve();

  /** Each pass of the group on its own, as score runs it here (a stamp of the inner runtime's). */
  async scoreGroup(request: ScoreGroupRequest, signal?: AbortSignal): Promise<ScoreGroupResponse> {
    const responses = await Promise.all(request.passes.map((pass) => this.score(pass, signal)));
    const { release_id, fingerprint } = responses[0]!;
    return { release_id, fingerprint, results: responses.map(({ release_id: _, fingerprint: __, ...result }) => result) };
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResponse> {
    const other = [{ text: `State:\nevicted ${randomBytes(4).toString("hex")}\n\n`, special: false }, { text: "Answer:", special: false }];
    const pair = async () => {
      await this.inner.score({ segments: other, prefix_segments: 1, label_tokens: request.label_tokens }, signal);
      return this.inner.score(request, signal);
    };
    const result = this.last.then(pair, pair);
    this.last = result.catch(() => undefined);
    return result;
  }
}

/** Fake: a runtime that answers score passes (and groups) from the `from`th on as another fingerprint (a swapped GPU host). */
class WrongFingerprintRuntime implements RuntimeClient {
  private passes = 0;
  private groups = 0;
  async scoreGroup(request: ScoreGroupRequest, signal?: AbortSignal): Promise<ScoreGroupResponse> {
    const response = await this.inner.scoreGroup(request, signal);
    this.groups += 1;
    return this.groups >= this.from ? { ...response, fingerprint: "0".repeat(64) } : response;
  }
  constructor(
    private readonly inner: RuntimeClient,
    private readonly from: number,
  ) {}
  identity = (signal?: AbortSignal) => this.inner.identity(signal);
  embed = (request: EmbedRequest, signal?: AbortSignal) => this.inner.embed(request, signal);
  tokenize = (request: TokenizeRequest, signal?: AbortSignal) => this.inner.tokenize(request, signal);
  async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResponse> {
    const response = await this.inner.score(request, signal);
    this.passes += 1;
    return this.passes >= this.from ? { ...response, fingerprint: "0".repeat(64) } : response;
  }
}

/** Fake: a runtime whose tokenize responses name another fingerprint (a misrouted runtime). */
class WrongStampRuntime implements RuntimeClient {
  constructor(private readonly inner: RuntimeClient) {}
  identity = (signal?: AbortSignal) => this.inner.identity(signal);
  embed = (request: EmbedRequest, signal?: AbortSignal) => this.inner.embed(request, signal);
  score = (request: ScoreRequest, signal?: AbortSignal) => this.inner.score(request, signal);
  scoreGroup = (request: ScoreGroupRequest, signal?: AbortSignal) => this.inner.scoreGroup(request, signal);
  async tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    return { ...(await this.inner.tokenize(request, signal)), fingerprint: "0".repeat(64) };
  }
}

/** Fake: a runtime that publishes a per-pass limit of `max` tokens (the real one takes it from its settings at start). */
class SmallPassRuntime implements RuntimeClient {
  constructor(
    private readonly inner: RuntimeClient,
    private readonly max: number,
  ) {}
  identity = (signal?: AbortSignal) => this.inner.identity(signal);
  embed = (request: EmbedRequest, signal?: AbortSignal) => this.inner.embed(request, signal);
  score = (request: ScoreRequest, signal?: AbortSignal) => this.inner.score(request, signal);
  scoreGroup = (request: ScoreGroupRequest, signal?: AbortSignal) => this.inner.scoreGroup(request, signal);
  async tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    return { ...(await this.inner.tokenize(request, signal)), max_tokens_per_pass: this.max };
  }
}

/** A runtime that rewrites the tokenization of some texts, each text on its own. */
abstract class RetokenizingRuntime implements RuntimeClient {
  constructor(protected readonly inner: RuntimeClient) {}
  identity = (signal?: AbortSignal) => this.inner.identity(signal);
  embed = (request: EmbedRequest, signal?: AbortSignal) => this.inner.embed(request, signal);
  score = (request: ScoreRequest, signal?: AbortSignal) => this.inner.score(request, signal);
  scoreGroup = (request: ScoreGroupRequest, signal?: AbortSignal) => this.inner.scoreGroup(request, signal);
  protected abstract retokenize(text: string): Promise<Tokenized> | null;
  async tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    const response = await this.inner.tokenize(request, signal);
    const results = await Promise.all(request.texts.map((t, i) => this.retokenize(t.text) ?? response.results[i]!));
    return { ...response, results };
  }
}

/** Fake: a model whose tokenizer splits `label` into two tokens. */
class MultiTokenLabelRuntime extends RetokenizingRuntime {
  constructor(
    inner: RuntimeClient,
    private readonly label: string,
  ) {
    super(inner);
  }
  protected retokenize(text: string): Promise<Tokenized> | null {
    if (text !== this.label) return null;
    return Promise.all([tokenizeOne(text.slice(0, 1)), tokenizeOne(text.slice(1))]).then(([a, b]) => ({ tokens: [...a.tokens, ...b.tokens], pieces: [...a.pieces, ...b.pieces] }));
  }
}

/** Fake: a model on which `label` is the very token of `sameAs`. */
class SharedTokenLabelRuntime extends RetokenizingRuntime {
  constructor(
    inner: RuntimeClient,
    private readonly label: string,
    private readonly sameAs: string,
  ) {
    super(inner);
  }
  protected retokenize(text: string): Promise<Tokenized> | null {
    return text === this.label ? tokenizeOne(this.sameAs).then(({ tokens }) => ({ tokens, pieces: [this.label] })) : null;
  }
}

describe("a trained release that reads the sentence embedding", () => {
  const question = { q: { type: "noul", instructions: "Does this sentence belong to group A?" } };
  const request = (state: string) => Decision.parse({ state, questions: question });
  /** A head on the answer state and the embedding, fitted on the example sentences as the training worker reads them. */
  async function trainedOn(sentences: { text: string; animal: boolean }[]): Promise<{ head: HeadParams; encoder: string }> {
    const reads = [];
    let encoder = "";
    for (const s of sentences) {
      const read = await exampleFeatures(real, release, request(s.text), undefined, true);
      encoder = read.embedding!.encoder;
      expect(read.embedding!.values).toHaveLength(384);
      reads.push(splitReads(read.features, [2], read.embedding!.values)[0]!);
    }
    const inputs = ["answer_state", "sentence_embedding"] as const;
    const { params } = trainHead(reads.map((r) => headInput(r, inputs)), sentences.map((s) => (s.animal ? 0 : 1)), 2);
    return { head: { ...params, inputs: [...inputs], encoder }, encoder };
  }
  const releaseWith = async (head: HeadParams): Promise<Release> => {
    const task = { questions: stringifyJson(request("x").questions) };
    const heads: TrainedHeads = { kind: "hidden_state_head", features: head.mean.length, questions: [head] };
    const fingerprint = await trainedFingerprint(release.fingerprint, task, heads);
    return { id: "ft:embedding", fingerprint, runtime: { id: release.id, fingerprint: release.fingerprint }, trained: { task, heads } };
  };

  it("is served from the state's embedding by the encoder the head names, in one pass, and refused by any other encoder (503 identity_mismatch)", async () => {
    const sentences = animalSentences();
    const { head, encoder } = await trainedOn(sentences.filter((_, i) => i % 2 === 0));
    const held = sentences.filter((_, i) => i % 2 === 1);
    const trained = await releaseWith(head);
    let right = 0;
    for (const s of held) {
      const execution = await executeDecision(real, trained, request(s.text));
      expect(execution.passes).toBe(1);
      const yes = (execution.answers.get("q") as NoulAnswer).noul;
      if (yes > 0.5 === s.animal) right += 1;
    }
    expect(right).toBeGreaterThanOrEqual(held.length - 2);

    // A head that names another encoder than the runtime's is never served with this one's numbers.
    const other = await releaseWith({ ...head, encoder: (encoder[0] === "0" ? "1" : "0") + encoder.slice(1) });
    const refused = await executeDecision(real, other, request(held[0]!.text)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused).toMatchObject({ code: "identity_mismatch", status: 503 });

    // Without `embed`, an example's features carry no embedding (a runtime without an encoder).
    expect((await exampleFeatures(real, release, request(held[0]!.text))).embedding).toBeNull();
  });
});
