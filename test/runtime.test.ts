/**
 * The model runtime, driven over its real protocol: `ensureModel()` provides the default GGUF (Gemma 3
 * 270M), `runtime/main.ts` runs under Bun as a child process, and every protocol check is an HTTP call
 * to it. A second runtime serves a copy of the weights with one metadata byte changed and a 64-token
 * pass limit, for the fingerprint and boundary checks.
 *
 * Model-specific facts used below (single-token "Yes"/"No", the chat markers, the vocabulary and
 * hidden sizes) are those of the default model, whose digest `ensureModel()` pins.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { copyFile, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ErrorEnvelope } from "../contract/errors.ts";
import { LIMITS } from "../contract/limits.ts";
import {
  EmbedResponse,
  GROUP_LOGPROB_TOLERANCE,
  GROUP_PASSES_MAX,
  Identity,
  RENDERING_VERSION,
  RUNTIME_PATHS,
  ScoreGroupResponse,
  ScoreResponse,
  Stats,
  TokenizeResponse,
  type Tokenized,
} from "../server-shared/runtime-protocol.ts";
import { ensureModel, type ModelFile } from "../local/model.ts";
import { ensureTextEncoder } from "../local/text-encoder.ts";
import { SentenceEncoder } from "../runtime/text-encoder.ts";
import { start } from "../local/process.ts";
import { cachedSha256, sha256File } from "../server-shared/digest.ts";
import type { ScoringEngine } from "../runtime/engine.ts";
import { defaultReleaseId, fingerprintOf } from "../runtime/fingerprint.ts";
import { GPU_COSTS } from "../runtime/fixed-pass-engine.ts";
import { createRuntimeApp } from "../runtime/server.ts";
import { runtimeEnv, startRuntime, type StartedRuntime } from "../local/tiers.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const GEMMA3_VOCABULARY = 262_144;
/** Gemma 3 270M's `n_embd`: the length of a hidden state. */
const GEMMA3_270M_HIDDEN = 640;

type Runtime = StartedRuntime;

let workDir: string;
let model: ModelFile;
let secret: string;
let main: Runtime;
/** Serves the altered copy of the weights, with a 64-token pass limit. */
let altered: Runtime;
let alteredPath: string;
/** The sentence encoder `main` runs (the altered runtime has none). */
let encoder: Awaited<ReturnType<typeof ensureTextEncoder>>;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "runtime-test-"));
  model = await ensureModel();
  secret = randomBytes(32).toString("hex");
  alteredPath = join(workDir, "gemma-3-270m-q4_k_m.gguf");
  await copyWithRenamedModel(model.path, alteredPath);
  [main, altered] = await Promise.all([
    startRuntime({ name: "runtime", modelPath: model.path, encoderPath: (encoder = await ensureTextEncoder()).path, secret, logDir: workDir }),
    startRuntime({ name: "runtime-altered", modelPath: alteredPath, secret, logDir: workDir, env: { RUNTIME_MAX_TOKENS_PER_PASS: "64", RUNTIME_GPU: "false" } }),
  ]);
});

afterAll(async () => {
  await Promise.all([main?.child.stop(), altered?.child.stop()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe("identity", () => {
  it("reports the release of the weights it serves", async () => {
    const identity = Identity.parse(await call(main, "GET", RUNTIME_PATHS.identity));
    const fingerprint = fingerprintOf({ weightsSha256: model.sha256, adapterSha256: null, renderingVersion: RENDERING_VERSION });
    expect(identity).toMatchObject({
      release_id: defaultReleaseId(model.path, fingerprint),
      fingerprint,
      rendering_version: RENDERING_VERSION,
      modalities: ["text"],
      max_tokens_per_pass: LIMITS.tokensPerPass,
    });
    // RUNTIME_GPU unset: the GPU build where a GPU is present, which this machine may lack.
    // RUNTIME_GPU unset is "auto": the builds passed over before the one that serves, and why, follow it.
    expect(identity.engine).toMatch(/^node-llama-cpp \d+\.\d+\.\d+, (cpu \(prebuilt\)|(cuda|vulkan) \((prebuilt|local build[^)]*)\) on .+)(, after .+)?$/);
    // The order: the local CUDA build (none is built here), the prebuilt CUDA build, Vulkan, then the CPU build.
    if (!hasGpuDevice()) {
      expect(identity.engine).toMatch(/, cpu \(prebuilt\), after cuda-local: no cuda-local build or device here \(no local CUDA build on this host \(npm run build:engine makes one\)\); cuda: .+; vulkan: .+$/);
    }
    expect(main.ready).toEqual({ port: Number(new URL(main.url).port), release_id: identity.release_id, fingerprint });
  });

  it("runs the CPU build when told to (RUNTIME_GPU=false), and says so", async () => {
    expect(Identity.parse(await call(altered, "GET", RUNTIME_PATHS.identity)).engine).toMatch(/^node-llama-cpp \d+\.\d+\.\d+, cpu \(prebuilt\)$/);
  });

  it("changes with any byte of the weights", async () => {
    const identity = Identity.parse(await call(altered, "GET", RUNTIME_PATHS.identity));
    const fingerprint = fingerprintOf({
      weightsSha256: await sha256File(alteredPath),
      adapterSha256: null,
      renderingVersion: RENDERING_VERSION,
    });
    expect(identity.fingerprint).toBe(fingerprint);
    expect(identity.fingerprint).not.toBe(main.ready.fingerprint);
    expect(identity.release_id).toBe(defaultReleaseId(alteredPath, fingerprint));
    expect(identity.release_id).not.toBe(main.ready.release_id);
    expect(identity.max_tokens_per_pass).toBe(64);
  });
});

describe("authorization", () => {
  const routes = [
    ["GET", RUNTIME_PATHS.identity, undefined],
    ["GET", RUNTIME_PATHS.stats, undefined],
    ["POST", RUNTIME_PATHS.tokenize, { texts: [{ text: "Yes" }] }],
    ["POST", RUNTIME_PATHS.score, { segments: [{ text: "Yes", special: true }], label_tokens: [1] }],
    ["POST", RUNTIME_PATHS.embed, { text: "Yes" }],
  ] as const;
  const presented: [string, () => Record<string, string>][] = [
    ["no Authorization header", () => ({})],
    ["a wrong secret", () => ({ authorization: `Bearer ${"0".repeat(64)}` })],
    ["the secret with a suffix", () => ({ authorization: `Bearer ${secret}x` })],
    ["the secret in another scheme", () => ({ authorization: `Basic ${secret}` })],
  ];
  for (const [method, path, body] of routes) {
    for (const [what, headers] of presented) {
      it(`${method} ${path} with ${what} is 401`, async () => {
        const res = await fetch(main.url + path, {
          method,
          headers: { ...headers(), "content-type": "application/json" },
          body: body && JSON.stringify(body),
        });
        expect(res.status).toBe(401);
        expect(ErrorEnvelope.parse(await res.json()).error).toEqual({
          code: "unauthorized",
          message: "missing or wrong runtime secret",
          status: 401,
        });
      });
    }
  }
});

describe("tokenize", () => {
  it("returns the model's tokens and what each decodes to, chat markers parsed, no BOS added", async () => {
    const text = "<start_of_turn>user\nIs the sky blue?<end_of_turn>";
    const { tokens, pieces } = await tokenize(text, true);
    expect(pieces).toHaveLength(tokens.length);
    expect(pieces.join("")).toBe(text);
    expect(pieces[0]).toBe("<start_of_turn>");
    expect(pieces.at(-1)).toBe("<end_of_turn>");
    expect(tokens[0]).not.toBe(2);
  });

  it("gives Yes and No one token each that decodes to itself", async () => {
    for (const label of ["Yes", "No", " Yes", " No"]) {
      expect(await tokenize(label)).toEqual({ tokens: [expect.any(Number)], pieces: [label] });
    }
  });

  it("parses no special marker in text that is not marked special (customer text cannot open a turn)", async () => {
    const marker = "<start_of_turn>";
    const special = await tokenize(marker, true);
    // `special` defaults to false.
    const plain = (await tokenizeAll([{ text: marker }])).results[0]!;
    expect(special.tokens).toHaveLength(1);
    expect(plain.tokens.length).toBeGreaterThan(1);
    expect(plain.tokens).not.toContain(special.tokens[0]);
    const [yes] = await labelTokens("Yes");
    const asText = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { segments: [{ text: marker.repeat(3), special: false }], label_tokens: [yes!] }));
    const plainThree = await tokenize(marker.repeat(3), false);
    expect(plainThree.tokens).not.toContain(special.tokens[0]);
    expect(asText.prompt_tokens).toBe(1 + plainThree.tokens.length);
  });

  it("returns nothing for empty text", async () => {
    expect(await tokenize("")).toEqual({ tokens: [], pieces: [] });
  });

  it("tokenizes every text of one call in order, stamped with the identity and the per-pass limit", async () => {
    const texts = [{ text: " Yes", special: false }, { text: "<end_of_turn>", special: true }, { text: "", special: false }, { text: " Yes", special: false }];
    const response = await tokenizeAll(texts);
    const identity = Identity.parse(await call(main, "GET", RUNTIME_PATHS.identity));
    expect(response).toMatchObject({ release_id: identity.release_id, fingerprint: identity.fingerprint, max_tokens_per_pass: identity.max_tokens_per_pass });
    expect(response.results).toEqual(await Promise.all(texts.map((t) => tokenize(t.text, t.special))));
    expect(response.results[0]).toEqual(response.results[3]);
    expect((await tokenizeAll([])).results).toEqual([]);
  });
});

describe("score", () => {
  const question = chatTurn("Is the sky blue on a clear day? Answer Yes or No.");

  it("counts the BOS token, echoes the identity, and gives the same numbers for the same pass", async () => {
    const labels = await labelTokens("Yes", "No");
    const first = await score(main, question, labels);
    const second = await score(main, question, labels);
    expect(second).toEqual(first);
    expect(first.prompt_tokens).toBe((await tokenize(question)).tokens.length + 1);
    expect(first).toMatchObject({ release_id: main.ready.release_id, fingerprint: main.ready.fingerprint });
  });

  it("counts passes and the time spent evaluating them in its stats", async () => {
    const labels = await labelTokens("Yes", "No");
    const before = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
    await score(main, question, labels);
    await score(main, question, labels);
    const after = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
    expect(after.passes - before.passes).toBe(2);
    expect(after.busy_ms).toBeGreaterThan(before.busy_ms);
    // A tokenize call is no pass: it leaves the counters alone.
    await tokenize("Yes");
    expect(Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats))).toEqual(after);
  });

  it("returns full-vocabulary log-probabilities: finite, <= 0, with total mass in (0, 1]", async () => {
    const labels = await labelTokens("Yes", "No", " Yes", " No", "banana", "Tuesday");
    const { logprobs } = await score(main, question, labels);
    expect(logprobs).toHaveLength(labels.length);
    for (const lp of logprobs) {
      expect(Number.isFinite(lp)).toBe(true);
      expect(lp).toBeLessThanOrEqual(0);
    }
    const mass = sum(logprobs.map(Math.exp));
    expect(mass).toBeGreaterThan(0);
    expect(mass).toBeLessThanOrEqual(1);
    // Normalised over the whole vocabulary, not over the labels asked: most of the mass lies
    // elsewhere, and a label's value does not depend on which other labels come with it.
    expect(mass).toBeLessThan(0.5);
    const alone = await score(main, question, labels.slice(2, 3));
    expect(alone.logprobs).toEqual([logprobs[2]]);
  });

  it("puts real mass on the answer labels of a yes/no question", async () => {
    // Unrelated words of the same kind (single common tokens) are the baseline a readout must beat.
    const { logprobs } = await score(main, question, await labelTokens("Yes", "No", "banana", "Tuesday", "purple"));
    const [answers, unrelated] = [sum(logprobs.slice(0, 2).map(Math.exp)), sum(logprobs.slice(2).map(Math.exp))];
    expect(answers).toBeGreaterThan(0.005);
    expect(answers).toBeGreaterThan(100 * unrelated);
    // Asked for "Answer:", the model continues with " Yes" or " No" far more often than with anything else.
    const prompt = `${chatTurn("Answer the question with Yes or No.\n\nQuestion: Is Paris the capital of France?")}Answer:`;
    const answer = await score(main, prompt, await labelTokens(" Yes", " No"));
    expect(sum(answer.logprobs.map(Math.exp))).toBeGreaterThan(0.25);
  });

  it("evaluates concurrent passes one at a time, each as if alone", async () => {
    const labels = await labelTokens("Yes", "No");
    const prompts = ["Is water wet?", "Is fire cold?", "Do fish swim?", "Can stones fly?"].map((q) => chatTurn(`${q} Answer Yes or No.`));
    const alone: ScoreResponse[] = [];
    for (const prompt of prompts) alone.push(await score(main, prompt, labels));
    const together = await Promise.all(prompts.map((prompt) => score(main, prompt, labels)));
    expect(together).toEqual(alone);
  });

  // The first hidden-state pass to `main` in this file (tests run in file order): it makes the
  // runtime's second context, the one that runs hidden-state passes.
  it("gives a pass the same logprobs with or without the hidden state, and later passes the logprobs they gave before", async () => {
    const labels = await labelTokens("Yes", "No");
    const log = Array.from({ length: 24 }, (_, i) => `Delivery ${i + 1} reached depot ${(i * 7) % 13} ${i % 3 === 0 ? "late" : "on time"}.`).join(" ");
    const prompts = [question, chatTurn(`Shipping log:\n${log}\n\nDid every delivery arrive on time? Answer Yes or No.`)];
    const before: ScoreResponse[] = [];
    for (const prompt of prompts) before.push(await score(main, prompt, labels));
    // One decode in the ordinary context; several, with other numbers (0.12 apart in a logprob), in
    // a context that split passes into decodes of 256 tokens or fewer.
    expect(before[1]!.prompt_tokens).toBe(278);

    const stats = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
    for (const [i, prompt] of prompts.entries()) {
      const asked = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { segments: [{ text: prompt, special: true }], label_tokens: labels, hidden_state: true }));
      const { hidden_state: state, ...rest } = asked;
      expect(state).toHaveLength(GEMMA3_270M_HIDDEN);
      expect(rest).toEqual(before[i]);
    }
    // Hidden-state passes count as passes, their evaluation as busy time.
    const after = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
    expect(after.passes - stats.passes).toBe(2);
    expect(after.busy_ms).toBeGreaterThan(stats.busy_ms);

    for (const [i, prompt] of prompts.entries()) expect(await score(main, prompt, labels)).toEqual(before[i]);
  });

  it("returns the answer position's hidden state from the same pass when asked, and only then", async () => {
    const labels = await labelTokens("Yes", "No");
    const body = { segments: [{ text: question, special: true }], label_tokens: labels };
    const plain = await call(main, "POST", RUNTIME_PATHS.score, body);
    expect(plain).not.toHaveProperty("hidden_state");
    expect(await call(main, "POST", RUNTIME_PATHS.score, { ...body, hidden_state: false })).toEqual(plain);

    const asked = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { ...body, hidden_state: true }));
    const { hidden_state: state, ...rest } = asked;
    expect(state).toHaveLength(GEMMA3_270M_HIDDEN);
    expect(state!.every(Number.isFinite)).toBe(true);
    expect(state!.some((x) => x !== 0)).toBe(true);
    // Reading it changes nothing else of the pass: the numbers are exactly those of the pass without it.
    expect(rest).toEqual(plain);

    const again = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { ...body, hidden_state: true }));
    expect(again.hidden_state).toEqual(state);
    // It is the answer position's state, whatever labels are read there.
    const sameState = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { ...body, label_tokens: await labelTokens("banana"), hidden_state: true }));
    expect(sameState.hidden_state).toEqual(state);

    const otherPrompt = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, { ...body, segments: [{ text: chatTurn("Is fire cold? Answer Yes or No."), special: true }], hidden_state: true }));
    expect(otherPrompt.hidden_state).toHaveLength(GEMMA3_270M_HIDDEN);
    expect(otherPrompt.hidden_state).not.toEqual(state);
  });

  it("accepts the last token id of the vocabulary and refuses the first one past it", async () => {
    await score(main, question, [GEMMA3_VOCABULARY - 1]);
    const refused = await callRaw(main, RUNTIME_PATHS.score, { segments: [{ text: question, special: true }], label_tokens: [1, GEMMA3_VOCABULARY] });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("invalid_request");
    expect(refused.body.error.message).toContain("label_tokens.1");
  });

  it("refuses duplicate labels, whose probabilities could add up past 1", async () => {
    const [yes] = await labelTokens("Yes");
    const refused = await callRaw(main, RUNTIME_PATHS.score, { segments: [{ text: question, special: true }], label_tokens: [yes, yes] });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: "invalid_request", status: 422 });
  });

  it("refuses a pass over the default limit before evaluating it", async () => {
    const started = Date.now();
    const refused = await callRaw(main, RUNTIME_PATHS.score, { segments: [{ text: markers(LIMITS.tokensPerPass), special: true }], label_tokens: [1] });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("pass_too_long");
    expect(refused.body.error.message).toContain(`${LIMITS.tokensPerPass + 1} tokens`);
    // Evaluating 4,096 tokens takes over ten seconds on two cores; a refusal takes a tokenization.
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("reads a pass's labels from their logits and the normaliser as the whole distribution gives them (RUNTIME_READOUT), within 2e-3", async () => {
    // Both reads sum the 262,144 exponentials in float32, in different orders (the whole distribution
    // largest first), so they differ in the third decimal: against a double-precision sum of every
    // logit, on the first prompt below, the label read is off by 7.8e-4 and the whole-distribution read
    // by 1.3e-3 (measured with node-llama-cpp 3.22.1, CPU build).
    // A runtime made as `main` is (context size and threads change llama.cpp's numbers), reading the whole distribution.
    const whole = await startRuntime({ name: "runtime-distribution", modelPath: model.path, secret, logDir: workDir, env: { RUNTIME_READOUT: "distribution" } });
    try {
      const labels = await labelTokens("Yes", "No", "Maybe", "The", "banana");
      for (const prompt of [question, chatTurn("Is a banana yellow? Answer Yes or No."), "State:\nN/A\n\nQuestion: Is it urgent?\nAnswer:"]) {
        const ours = await score(main, prompt, labels);
        const theirs = await score(whole, prompt, labels);
        expect(ours.prompt_tokens).toBe(theirs.prompt_tokens);
        ours.logprobs.forEach((value, i) => expect(Math.abs(value - theirs.logprobs[i]!), `label ${i} of ${JSON.stringify(prompt)}`).toBeLessThan(2e-3));
        expect(sum(ours.logprobs.map(Math.exp))).toBeLessThanOrEqual(1 + 1e-6);
      }
    } finally {
      await whole.child.stop();
    }
  });

  it("evaluates a pass of exactly max_tokens_per_pass tokens and refuses one more", async () => {
    const full = await score(altered, markers(63), await labelTokens("Yes"));
    expect(full.prompt_tokens).toBe(64);
    const refused = await callRaw(altered, RUNTIME_PATHS.score, { segments: [{ text: markers(64), special: true }], label_tokens: [1] });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: "pass_too_long", status: 422 });
  });

  describe("prefixes (prefix_segments): the state several passes share, evaluated once", () => {
    const state = `State:\n${Array.from({ length: 30 }, (_, i) => `Ticket ${i + 1}: the card was charged ${i % 3 === 0 ? "twice" : "once"} for order ${1000 + i}.`).join(" ")}\n\n`;
    const rests = ["Question: Is this about money?\nAnswer:", "Question: Is the customer angry?\nAnswer:", "Question: Does it mention a refund?\nAnswer:"];
    const pass = <T extends object>(prefix: string, rest: string, extra: T) => ({
      segments: [
        { text: prefix, special: false },
        { text: rest, special: false },
      ],
      prefix_segments: 1,
      ...extra,
    });
    const scored = async (body: unknown) => ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, body));
    /** The pass with its prefix evaluated anew: another prefix runs first, so nothing of this one is kept. */
    const anew = async (body: { label_tokens: number[] }) => {
      await scored(pass("State:\nsomething else entirely\n\n", rests[0]!, { label_tokens: body.label_tokens }));
      return scored(body);
    };

    it("evaluates only the rest when the prefix is kept, with exactly the numbers of the prefix evaluated anew", async () => {
      const labels = await labelTokens(" Yes", " No", "Yes", "No");
      const prefixTokens = 1 + (await tokenize(state, false)).tokens.length;
      const before = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
      const kept = [await scored(pass(state, rests[0]!, { label_tokens: labels }))];
      for (const rest of rests.slice(1)) kept.push(await scored(pass(state, rest, { label_tokens: labels })));
      const stats = Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats));
      for (const [i, rest] of rests.entries()) {
        const restTokens = (await tokenize(rest, false)).tokens.length;
        expect(kept[i]!.prompt_tokens).toBe(prefixTokens + restTokens);
        expect(kept[i]!.prefix_tokens).toBe(prefixTokens);
        // The first pass evaluates the prefix; the others find it kept.
        expect(kept[i]!.evaluated_tokens).toBe(i === 0 ? prefixTokens + restTokens : restTokens);
        const fresh = await anew(pass(state, rest, { label_tokens: labels }));
        expect(fresh.evaluated_tokens).toBe(prefixTokens + restTokens);
        expect(fresh.logprobs).toEqual(kept[i]!.logprobs);
      }
      // The runtime's own counter: what was evaluated, the kept prefix not counted again.
      expect(stats.evaluated_tokens - before.evaluated_tokens).toBe(sum(kept.map((k) => k.evaluated_tokens!)));
      expect(stats.evaluated_tokens - before.evaluated_tokens).toBeLessThan(sum(kept.map((k) => k.prompt_tokens)));
    });

    it("keeps a prefix for its owner only: the same prefix under another prefix_owner is evaluated again, with the same numbers", async () => {
      const labels = await labelTokens(" Yes", " No");
      const prefixTokens = 1 + (await tokenize(state, false)).tokens.length;
      const first = await anew(pass(state, rests[0]!, { label_tokens: labels, prefix_owner: "owner-a" }));
      const same = await scored(pass(state, rests[1]!, { label_tokens: labels, prefix_owner: "owner-a" }));
      const other = await scored(pass(state, rests[1]!, { label_tokens: labels, prefix_owner: "owner-b" }));
      const otherAgain = await scored(pass(state, rests[1]!, { label_tokens: labels, prefix_owner: "owner-b" }));
      const none = await scored(pass(state, rests[1]!, { label_tokens: labels }));
      expect(first.evaluated_tokens).toBe(first.prompt_tokens);
      expect(same.evaluated_tokens).toBe(same.prompt_tokens - prefixTokens);
      expect(other.evaluated_tokens).toBe(other.prompt_tokens);
      expect(otherAgain.evaluated_tokens).toBe(otherAgain.prompt_tokens - prefixTokens);
      expect(none.evaluated_tokens).toBe(none.prompt_tokens);
      expect(other.logprobs).toEqual(same.logprobs);
      expect((await callRaw(main, RUNTIME_PATHS.score, pass(state, rests[0]!, { label_tokens: labels, prefix_owner: "x".repeat(65) }))).status).toBe(422);
    });

    it("gives a hidden-state pass with a prefix the logprobs of the ordinary pass, kept or not", async () => {
      const labels = await labelTokens(" Yes", " No");
      const ordinary = await anew(pass(state, rests[1]!, { label_tokens: labels }));
      const hiddenFirst = await scored(pass(state, rests[1]!, { label_tokens: labels, hidden_state: true }));
      const hiddenKept = await scored(pass(state, rests[1]!, { label_tokens: labels, hidden_state: true }));
      expect(hiddenKept.evaluated_tokens).toBeLessThan(hiddenKept.prompt_tokens);
      expect(hiddenFirst.logprobs).toEqual(ordinary.logprobs);
      expect(hiddenKept.logprobs).toEqual(ordinary.logprobs);
      expect(hiddenKept.hidden_state).toEqual(hiddenFirst.hidden_state);
    });

    it("pools the prefix's hidden states when asked (pooled_state), kept with the prefix, and never mixes a pooled prefix with a whole one", async () => {
      const labels = await labelTokens(" Yes", " No");
      const pooledFirst = await anew(pass(state, rests[0]!, { label_tokens: labels, hidden_state: true, pooled_state: true }));
      expect(pooledFirst.pooled_state).toHaveLength(GEMMA3_270M_HIDDEN);
      expect(pooledFirst.pooled_state!.every(Number.isFinite)).toBe(true);
      // The mean of states along the prefix is not the answer position's state.
      expect(pooledFirst.pooled_state).not.toEqual(pooledFirst.hidden_state);
      // Kept: the next pooled pass with the same prefix evaluates its rest only and returns the same pooled state.
      const pooledKept = await scored(pass(state, rests[2]!, { label_tokens: labels, hidden_state: true, pooled_state: true }));
      expect(pooledKept.evaluated_tokens).toBeLessThan(pooledKept.prompt_tokens);
      expect(pooledKept.pooled_state).toEqual(pooledFirst.pooled_state);
      // Evaluated anew, the same numbers: they depend on the prefix and rest only.
      const pooledAnew = await anew(pass(state, rests[2]!, { label_tokens: labels, hidden_state: true, pooled_state: true }));
      expect(pooledAnew).toMatchObject({ logprobs: pooledKept.logprobs, hidden_state: pooledKept.hidden_state, pooled_state: pooledKept.pooled_state });
      // A pass that does not pool after a pooled one evaluates its prefix whole again, and gets the numbers of a whole prefix.
      const whole = await scored(pass(state, rests[2]!, { label_tokens: labels, hidden_state: true }));
      expect(whole.evaluated_tokens).toBe(whole.prompt_tokens);
      expect(whole).not.toHaveProperty("pooled_state");
      const wholeAgain = await anew(pass(state, rests[2]!, { label_tokens: labels, hidden_state: true }));
      expect(wholeAgain.hidden_state).toEqual(whole.hidden_state);
      // Another state pools to another vector.
      const other = await anew(pass("State:\nThe parcel arrived broken and late, and nobody answers the phone.\n\n", rests[0]!, { label_tokens: labels, hidden_state: true, pooled_state: true }));
      expect(other.pooled_state).not.toEqual(pooledFirst.pooled_state);
    });

    it("refuses pooled_state without hidden_state or without a prefix (422 invalid_request)", async () => {
      const labels = await labelTokens(" Yes", " No");
      for (const body of [
        pass(state, rests[0]!, { label_tokens: labels, pooled_state: true }),
        { segments: [{ text: state + rests[0]!, special: false }], label_tokens: labels, hidden_state: true, pooled_state: true },
      ]) {
        const refused = await callRaw(main, RUNTIME_PATHS.score, body);
        expect(refused.status).toBe(422);
        expect(refused.body.error).toMatchObject({ code: "invalid_request", message: expect.stringContaining("pooled_state") });
      }
    });

    it("tokenizes a prefix again when a segment's text or its special marking changes, and keeps nothing of the other one", async () => {
      const labels = await labelTokens(" Yes", " No");
      const marker = "<start_of_turn>user\n";
      const prefixOf = (special: boolean, text: string) => ({
        segments: [
          { text: marker, special },
          { text, special: false },
          { text: rests[0]!, special: false },
        ],
        prefix_segments: 2,
        label_tokens: labels,
      });
      const tokensOf = async (special: boolean, text: string) => 1 + (await tokenize(marker, special)).tokens.length + (await tokenize(text, false)).tokens.length;
      // Each prefix differs from the one before it (the marker one token or several; one word changed).
      for (const [special, text] of [[true, state], [false, state], [false, state.replace("Ticket 1:", "Ticket 9:")], [true, state]] as const) {
        const scoredPass = await scored(prefixOf(special, text));
        expect(scoredPass.prefix_tokens).toBe(await tokensOf(special, text));
        // Evaluated in full: never taken for the prefix kept before it.
        expect(scoredPass.evaluated_tokens).toBe(scoredPass.prompt_tokens);
      }
      expect(await tokensOf(true, state)).toBeLessThan(await tokensOf(false, state));
    });

    it("keeps nothing for a pass without a prefix, which evaluates every token", async () => {
      const labels = await labelTokens(" Yes", " No");
      const body = { segments: [{ text: state + rests[0]!, special: false }], label_tokens: labels };
      const one = await scored(body);
      const two = await scored(body);
      expect(one).toEqual(two);
      expect(two.prefix_tokens).toBe(0);
      expect(two.evaluated_tokens).toBe(two.prompt_tokens);
    });

    it("refuses a prefix with no token after it (422 invalid_request naming prefix_segments)", async () => {
      const labels = await labelTokens(" Yes", " No");
      for (const body of [
        { segments: [{ text: state, special: false }], prefix_segments: 1, label_tokens: labels },
        pass(state, "", { label_tokens: labels }),
        pass(state, rests[0]!, { label_tokens: labels, prefix_segments: -1 }),
        pass(state, rests[0]!, { label_tokens: labels, prefix_segments: 0.5 }),
        pass(state, rests[0]!, { label_tokens: labels, prefix_segments: "1" }),
      ]) {
        const refused = await callRaw(main, RUNTIME_PATHS.score, body);
        expect(refused.status).toBe(422);
        expect(refused.body.error.code).toBe("invalid_request");
        expect(refused.body.error.message).toContain("prefix_segments");
      }
    });
  });

  describe("malformed bodies are 422 invalid_request naming the field", () => {
    const cases: [string, string, string][] = [
      ["not JSON", "{", "body is not valid JSON"],
      ["no segments", JSON.stringify({ label_tokens: [1] }), "segments"],
      ["an empty prompt", JSON.stringify({ segments: [{ text: "", special: true }], label_tokens: [1] }), "segments"],
      ["no labels", JSON.stringify({ segments: [{ text: "x", special: true }], label_tokens: [] }), "label_tokens"],
      ["a negative label", JSON.stringify({ segments: [{ text: "x", special: true }], label_tokens: [-1] }), "label_tokens.0"],
      ["a fractional label", JSON.stringify({ segments: [{ text: "x", special: true }], label_tokens: [3, 1.5] }), "label_tokens.1"],
      ["labels as a string", JSON.stringify({ segments: [{ text: "x", special: true }], label_tokens: "1" }), "label_tokens"],
      ["hidden_state that is not a boolean", JSON.stringify({ segments: [{ text: "x", special: true }], label_tokens: [1], hidden_state: "yes" }), "hidden_state"],
    ];
    for (const [what, body, field] of cases) {
      it(`score with ${what}`, async () => {
        const res = await fetch(main.url + RUNTIME_PATHS.score, { method: "POST", headers: authorized(), body });
        expect(res.status).toBe(422);
        const { error } = ErrorEnvelope.parse(await res.json());
        expect(error.code).toBe("invalid_request");
        expect(error.message).toContain(field);
      });
    }

    it("tokenize without texts, or with a text that is not text", async () => {
      const refused = await callRaw(main, RUNTIME_PATHS.tokenize, { text: "x" });
      expect(refused.status).toBe(422);
      expect(refused.body.error.message).toContain("texts");
      const notText = await callRaw(main, RUNTIME_PATHS.tokenize, { texts: [{ text: "a" }, { text: 7 }] });
      expect(notText.status).toBe(422);
      expect(notText.body.error.message).toContain("texts.1.text");
    });
  });
});

describe("choosing the engine build (RUNTIME_GPU=auto)", () => {
  it("survives a GPU build that aborts the process at its first pass: proven in a probe process, passed over, said in the identity and the log", async () => {
    // A fake: this machine has no GPU build that aborts, so the probe for each listed build aborts as
    // node-llama-cpp's CUDA build did on an H100 whose driver could not compile its code.
    const aborting = await startRuntime({ name: "runtime-aborting-builds", modelPath: model.path, secret, logDir: workDir, env: { RUNTIME_PROBE_FAKE_ABORT: "cuda-local,cuda,vulkan" } });
    try {
      const identity = Identity.parse(await call(aborting, "GET", RUNTIME_PATHS.identity));
      expect(identity.engine).toMatch(
        /, cpu \(prebuilt\), after cuda-local: its probe pass was killed by SIGABRT: .*; cuda: its probe pass was killed by SIGABRT: .*; vulkan: its probe pass was killed by SIGABRT: /,
      );
      expect(identity.fingerprint).toBe(main.ready.fingerprint);
      const response = await score(aborting, "<start_of_turn>user\nIs the sky blue?<end_of_turn>\n<start_of_turn>model\n", await labelTokens("Yes", "No"));
      expect(response.logprobs).toHaveLength(2);
      const log = await readFile(aborting.child.logPath, "utf8");
      expect(log).toMatch(
        /runtime: not the cuda-local build: its probe pass was killed by SIGABRT[^\n]*\nruntime: not the cuda build: its probe pass was killed by SIGABRT[^\n]*\nruntime: not the vulkan build: [^\n]*\nruntime: serving with the CPU build\n/,
      );
    } finally {
      await aborting.child.stop();
    }
  });

  it("insists on the build asked for, with no probe and no fallback", async () => {
    const log = await readFile(altered.child.logPath, "utf8");
    expect(log).not.toMatch(/probe|not the (cuda-local|cuda|vulkan) build/);
  });
});

describe("a stand-in for a GPU (RUNTIME_FAKE_PASS_MS, benchmarks only)", () => {
  it("takes the fixed time for every pass, one at a time, evaluates nothing, and says so in the identity", async () => {
    const fixed = await startRuntime({ name: "runtime-fixed-passes", modelPath: model.path, secret, logDir: workDir, env: { RUNTIME_GPU: "false", RUNTIME_FAKE_PASS_MS: "25" } });
    try {
      const identity = Identity.parse(await call(fixed, "GET", RUNTIME_PATHS.identity));
      expect(identity.engine).toBe("fixed 25 ms passes (a stand-in for a GPU, no evaluation)");
      expect(identity.fingerprint).toBe(main.ready.fingerprint);
      const labels = await labelTokens("Yes", "No");
      const started = performance.now();
      const answers = await Promise.all([0, 1, 2, 3].map((i) => score(fixed, `Is ${i} even?`, labels)));
      // Four passes queued at once take four fixed times: one at a time, as a GPU runs them.
      expect(performance.now() - started).toBeGreaterThanOrEqual(100);
      for (const answer of answers) {
        expect(answer.logprobs).toHaveLength(2);
        expect(answer.logprobs.reduce((sum, lp) => sum + Math.exp(lp), 0)).toBeLessThanOrEqual(0.5);
      }
      // Its counters are the passes it was sent, each busy for at least the fixed time (how much longer
      // a timer overshoots is the machine's, not this stand-in's, so no upper bound is asserted).
      const stats = Stats.parse(await call(fixed, "GET", RUNTIME_PATHS.stats));
      expect(stats.passes).toBe(4);
      expect(stats.busy_ms).toBeGreaterThanOrEqual(4 * 24);
      // It tokenizes a pass as the engine does (special-token markers, the beginning of sequence, a prefix).
      const segments = [
        { text: "<start_of_turn>user\nA state: the invoice was charged twice.", special: true },
        { text: "<b>Is it about money?</b>", special: false },
        { text: "<end_of_turn>\n<start_of_turn>model\n", special: true },
      ];
      for (const prefix_segments of [0, 1, 2]) {
        const pass = { segments, prefix_segments, label_tokens: labels };
        const real = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, pass));
        const standIn = ScoreResponse.parse(await call(fixed, "POST", RUNTIME_PATHS.score, pass));
        expect({ prompt: standIn.prompt_tokens, prefix: standIn.prefix_tokens }, `prefix_segments ${prefix_segments}`).toEqual({ prompt: real.prompt_tokens, prefix: real.prefix_tokens });
      }
    } finally {
      await fixed.child.stop();
    }
  });
});

describe("score-group: several passes in one call", () => {
  const state = (n: number) => ({ text: `<start_of_turn>user\nTicket ${n}: ${"The invoice was charged twice and nobody answers my mail. ".repeat(20)}`, special: true });
  const pass = (prefix: { text: string; special: boolean } | null, question: string, labels: number[], extra: Record<string, unknown> = {}) => ({
    segments: [...(prefix ? [prefix] : [{ text: "<start_of_turn>user\nA short ticket.", special: true }]), { text: question, special: false }, { text: "<end_of_turn>\n<start_of_turn>model\n", special: true }],
    prefix_segments: prefix ? 1 : 0,
    label_tokens: labels,
    ...extra,
  });

  it("answers each pass as /v1/score does, one after another on a runtime of one sequence, and states its sequences", async () => {
    expect(Identity.parse(await call(main, "GET", RUNTIME_PATHS.identity)).sequences).toBe(1);
    const labels = await labelTokens("Yes", "No");
    const passes = [pass(state(1), "Is it about money?", labels), pass(state(1), "Is the customer angry?", labels), pass(null, "Is it spam?", labels)];
    const group = ScoreGroupResponse.parse(await call(main, "POST", RUNTIME_PATHS.scoreGroup, { passes }));
    expect(group).toMatchObject({ release_id: main.ready.release_id, fingerprint: main.ready.fingerprint });
    for (const [i, one] of passes.entries()) {
      const alone = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, one));
      expect(group.results[i]!.logprobs).toEqual(alone.logprobs);
      expect(group.results[i]!.prompt_tokens).toBe(alone.prompt_tokens);
    }
  });

  it("runs a real-time call before the background's waiting turns, never stopping the turn that runs", async () => {
    const labels = await labelTokens("Yes", "No");
    const short = (name: string) => pass({ text: `<start_of_turn>user\nTicket ${name}: charged twice.`, special: true }, "Is it about money?", labels);
    const passes = async () => Stats.parse(await call(main, "GET", RUNTIME_PATHS.stats)).passes;
    const order: string[] = [];
    const send = (name: string, body: unknown) => call(main, "POST", RUNTIME_PATHS.scoreGroup, body).then(() => order.push(name));
    // Two background calls of six passes each: on a runtime of one sequence, a turn for each pass.
    const start = await passes();
    const background = [1, 2].map((n) => send(`background ${n}`, { passes: [1, 2, 3, 4, 5, 6].map((i) => short(`${n}-${i}`)) }));
    while ((await passes()) === start) await new Promise((resolve) => setTimeout(resolve, 5));
    // The first background turns have run: a real-time call and a third background call arrive together.
    const late = [send("real time", { passes: [short("r-1"), short("r-2")], realtime: true }), send("background 3", { passes: [short("3-1")] })];
    await Promise.all([...background, ...late]);
    // In the order they arrived, real time would have waited for all twelve background passes. The
    // background calls take turns pass by pass, so the one-pass third call ends before the first two
    // (which of those ends first is the order their requests reached the runtime).
    expect(order.slice(0, 2)).toEqual(["real time", "background 3"]);
    expect(order.slice(2).sort()).toEqual(["background 1", "background 2"]);
  });

  it("with several sequences evaluates each prefix once and the rests together, within GROUP_LOGPROB_TOLERANCE of the one-pass numbers", async () => {
    const grouped = await startRuntime({ name: "runtime-sequences", modelPath: model.path, secret, logDir: workDir, env: { RUNTIME_GPU: "false", RUNTIME_SEQUENCES: "4" } });
    try {
      expect(Identity.parse(await call(grouped, "GET", RUNTIME_PATHS.identity)).sequences).toBe(4);
      const labels = await labelTokens("Yes", "No");
      // Six passes: four questions over one state, one over another, one with no prefix (two decodes' worth of sequences).
      const questions = ["Is it about money?", "Is the customer angry?", "Does it mention a refund?", "Is it urgent?"];
      const passes = [...questions.map((q) => pass(state(2), q, labels)), pass(state(3), "Is it about money?", labels), pass(null, "Is it spam?", labels)];
      const before = Stats.parse(await call(grouped, "GET", RUNTIME_PATHS.stats));
      const group = ScoreGroupResponse.parse(await call(grouped, "POST", RUNTIME_PATHS.scoreGroup, { passes }));
      const after = Stats.parse(await call(grouped, "GET", RUNTIME_PATHS.stats));
      expect(after.passes - before.passes).toBe(passes.length);
      let largest = 0;
      for (const [i, one] of passes.entries()) {
        const alone = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, one));
        const result = group.results[i]!;
        expect({ prompt: result.prompt_tokens, prefix: result.prefix_tokens }).toEqual({ prompt: alone.prompt_tokens, prefix: alone.prefix_tokens });
        result.logprobs.forEach((lp, j) => (largest = Math.max(largest, Math.abs(lp - alone.logprobs[j]!))));
      }
      console.log(`score-group: largest |difference| from the one-pass numbers over ${passes.length} passes: ${largest.toFixed(4)}`);
      expect(largest).toBeLessThanOrEqual(GROUP_LOGPROB_TOLERANCE);
      // Each prefix evaluated once: the first pass over a state counts it, the others their rests alone.
      const prefixOf = (i: number) => group.results[i]!.prefix_tokens!;
      const rests = group.results.map((r) => r.prompt_tokens - r.prefix_tokens!);
      expect(group.results.map((r) => r.evaluated_tokens)).toEqual(rests.map((rest, i) => rest + (i === 0 || i === 4 ? prefixOf(i) : 0)));
      expect(after.evaluated_tokens - before.evaluated_tokens).toBe(rests.reduce((a, b) => a + b, 0) + prefixOf(0) + prefixOf(4));
      // The same questions again: the state is held, nothing but the rests is evaluated, and the numbers repeat.
      const again = ScoreGroupResponse.parse(await call(grouped, "POST", RUNTIME_PATHS.scoreGroup, { passes: passes.slice(0, 4) }));
      expect(again.results.map((r) => r.evaluated_tokens)).toEqual(rests.slice(0, 4));
      expect(again.results.map((r) => r.logprobs)).toEqual(group.results.slice(0, 4).map((r) => r.logprobs));
      // A hidden-state pass in a group is evaluated on its own, as /v1/score evaluates it.
      const hidden = ScoreGroupResponse.parse(await call(grouped, "POST", RUNTIME_PATHS.scoreGroup, { passes: [pass(state(2), "Is it urgent?", labels, { hidden_state: true }), passes[0]] }));
      const hiddenAlone = ScoreResponse.parse(await call(main, "POST", RUNTIME_PATHS.score, pass(state(2), "Is it urgent?", labels, { hidden_state: true })));
      expect(hidden.results[0]!.hidden_state).toEqual(hiddenAlone.hidden_state);
      expect(hidden.results[1]!.hidden_state).toBeUndefined();
      // One pass over the per-pass limit refuses the call before anything is evaluated.
      const stats = Stats.parse(await call(grouped, "GET", RUNTIME_PATHS.stats));
      const tooLong = pass({ text: "word ".repeat(LIMITS.tokensPerPass + 10), special: false }, "Is it long?", labels);
      const refused = await callRaw(grouped, RUNTIME_PATHS.scoreGroup, { passes: [passes[0], tooLong] });
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe("pass_too_long");
      expect(Stats.parse(await call(grouped, "GET", RUNTIME_PATHS.stats)).passes).toBe(stats.passes);
      // The call's bounds: at least one pass, at most GROUP_PASSES_MAX.
      for (const body of [{ passes: [] }, { passes: Array.from({ length: GROUP_PASSES_MAX + 1 }, () => passes[0]) }]) {
        expect((await callRaw(grouped, RUNTIME_PATHS.scoreGroup, body)).status).toBe(422);
      }
    } finally {
      await grouped.child.stop();
    }
  });
});

describe("a stand-in for a GPU's decode costs (RUNTIME_FAKE_GPU=h200, benchmarks only)", () => {
  it("costs each decode its fixed part and its tokens, and each read its own: new prefixes packed into decodes, a kept one none", async () => {
    const gpu = await startRuntime({ name: "runtime-fake-gpu", modelPath: model.path, secret, logDir: workDir, env: { RUNTIME_GPU: "false", RUNTIME_FAKE_GPU: "h200" } });
    try {
      const { decodeMs, tokenMs, readMs } = GPU_COSTS.h200;
      const identity = Identity.parse(await call(gpu, "GET", RUNTIME_PATHS.identity));
      expect(identity.engine).toBe(`h200 decode costs: ${decodeMs} ms a decode, ${tokenMs} ms a token, ${readMs} ms a label read (a stand-in for a GPU, no evaluation)`);
      const labels = await labelTokens("Yes", "No");
      const state = { text: `<start_of_turn>user\n${"The invoice was charged twice and nobody answers my mail. ".repeat(60)}`, special: true };
      const question = (q: string) => [state, { text: q, special: false }, { text: "<end_of_turn>\n<start_of_turn>model\n", special: true }];
      const busy = async () => Stats.parse(await call(gpu, "GET", RUNTIME_PATHS.stats)).busy_ms;
      // A new prefix: two decodes (the prefix; the rest and its read). The same prefix again: one.
      const first = ScoreResponse.parse(await call(gpu, "POST", RUNTIME_PATHS.score, { segments: question("Is it about money?"), prefix_segments: 1, label_tokens: labels }));
      const afterFirst = await busy();
      const rest = first.prompt_tokens - first.prefix_tokens!;
      expect(first.prefix_tokens).toBeGreaterThan(500);
      expect(afterFirst).toBeCloseTo(2 * decodeMs + first.prompt_tokens * tokenMs + readMs, 6);
      const started = performance.now();
      const again = ScoreResponse.parse(await call(gpu, "POST", RUNTIME_PATHS.score, { segments: question("Is it about money?"), prefix_segments: 1, label_tokens: labels }));
      expect(again.evaluated_tokens).toBe(rest);
      expect((await busy()) - afterFirst).toBeCloseTo(decodeMs + rest * tokenMs + readMs, 6);
      // It waits that long (a lower bound: how late a timer wakes is the machine's).
      expect(performance.now() - started).toBeGreaterThanOrEqual(decodeMs + rest * tokenMs + readMs - 1);
      // No prefix: one decode of every token.
      const before = await busy();
      const whole = ScoreResponse.parse(await call(gpu, "POST", RUNTIME_PATHS.score, { segments: question("Is it about money?"), label_tokens: labels }));
      expect((await busy()) - before).toBeCloseTo(decodeMs + whole.prompt_tokens * tokenMs + readMs, 6);
      // A group as a GPU of many sequences runs it: the new state once, every rest in one decode, a read each.
      expect(Identity.parse(await call(gpu, "GET", RUNTIME_PATHS.identity)).sequences).toBe(16);
      const questions = ["Is it about money?", "Is the customer angry?", "Does it mention a refund?", "Is it urgent?"];
      const fresh = { text: `${state.text} Ticket 7.`, special: true };
      const grouped = (text: { text: string; special: boolean }) => questions.map((q) => ({ segments: [text, ...question(q).slice(1)], prefix_segments: 1, label_tokens: labels }));
      const groupBefore = await busy();
      const group = ScoreGroupResponse.parse(await call(gpu, "POST", RUNTIME_PATHS.scoreGroup, { passes: grouped(fresh) }));
      const rests = group.results.map((r) => r.prompt_tokens - r.prefix_tokens!);
      const prefix = group.results[0]!.prefix_tokens!;
      expect(group.results.map((r) => r.evaluated_tokens)).toEqual(rests.map((rest, i) => rest + (i === 0 ? prefix : 0)));
      const restSum = rests.reduce((a, b) => a + b, 0);
      // The state's decodes of at most 512 tokens, then one for the rests.
      expect((await busy()) - groupBefore).toBeCloseTo((Math.ceil(prefix / 512) + 1) * decodeMs + (prefix + restSum) * tokenMs + questions.length * readMs, 6);
      // Again: the state is held, one decode.
      const heldBefore = await busy();
      await call(gpu, "POST", RUNTIME_PATHS.scoreGroup, { passes: grouped(fresh) });
      expect((await busy()) - heldBefore).toBeCloseTo(decodeMs + restSum * tokenMs + questions.length * readMs, 6);
      // Four short new states, one question each: the four prefixes packed into one decode, the rests into another.
      const short = (n: number) => ({ text: `<start_of_turn>user\nTicket ${n}: charged twice.`, special: true });
      const packedBefore = await busy();
      const packed = ScoreGroupResponse.parse(await call(gpu, "POST", RUNTIME_PATHS.scoreGroup, { passes: [1, 2, 3, 4].map((n) => grouped(short(n))[0]!) }));
      const packedTokens = packed.results.reduce((sum, r) => sum + r.evaluated_tokens!, 0);
      expect(packed.results.every((r) => r.evaluated_tokens === r.prompt_tokens)).toBe(true);
      expect((await busy()) - packedBefore).toBeCloseTo(2 * decodeMs + packedTokens * tokenMs + 4 * readMs, 6);
    } finally {
      await gpu.child.stop();
    }
  });
});

describe("embed (the sentence encoder beside the model)", () => {
  it("names its encoder in the identity, apart from the model's fingerprint, and embeds as the encoder does in process", async () => {
    const identity = Identity.parse(await call(main, "GET", RUNTIME_PATHS.identity));
    const expected = createHash("sha256").update(`${encoder.sha256}:${await cachedSha256(encoder.tokenizerPath)}`).digest("hex");
    expect(identity.encoder).toEqual({ name: "all-minilm-l6-v2", fingerprint: expected, width: 384 });
    expect(identity.fingerprint).toBe(fingerprintOf({ weightsSha256: model.sha256, adapterSha256: null, renderingVersion: RENDERING_VERSION }));

    const text = "The parcel came two weeks late and the box was crushed.";
    const response = EmbedResponse.parse(await call(main, "POST", RUNTIME_PATHS.embed, { text }));
    expect(response).toMatchObject({ release_id: identity.release_id, fingerprint: identity.fingerprint, encoder: expected, tokens: 14 }); // [CLS], twelve words and "." one piece each, [SEP]
    const inProcess = await (await SentenceEncoder.load({ modelPath: encoder.path, tokenizerPath: encoder.tokenizerPath, threads: 1 })).embed(text);
    expect(response.embedding).toHaveLength(384);
    response.embedding.forEach((x, i) => expect(x).toBeCloseTo(inProcess.embedding[i]!, 5));
  });

  it("refuses a malformed body with 422, and a runtime without an encoder answers 404 and names none", async () => {
    for (const body of [{}, { text: 7 }, { text: null }, []]) {
      const refused = await callRaw(main, RUNTIME_PATHS.embed, body);
      expect(refused.status, JSON.stringify(body)).toBe(422);
      expect(refused.body.error.code).toBe("invalid_request");
    }
    expect(Identity.parse(await call(altered, "GET", RUNTIME_PATHS.identity)).encoder).toBeUndefined();
    const absent = await callRaw(altered, RUNTIME_PATHS.embed, { text: "hello" });
    expect(absent.status).toBe(404);
    expect(absent.body.error.code).toBe("not_found");
  });
});

describe("process", () => {
  it("refuses to start without a secret", async () => {
    const logPath = join(workDir, "no-secret.log");
    const run = start({
      name: "runtime-no-secret",
      command: BUN,
      args: ["runtime/main.ts"],
      cwd: ROOT,
      env: { ...runtimeEnv(model.path, secret), RUNTIME_SECRET: "", RUNTIME_PORT: "0" },
      logPath,
      ready: async () => false,
      timeoutMs: 10_000,
    });
    await expect(run).rejects.toThrow(/exited with 2[\s\S]*RUNTIME_SECRET \(or RUNTIME_SECRET_FILE\) is required/);
  });

  it("logs neither the secret nor any prompt", async () => {
    const log = await readFile(main.child.logPath, "utf8");
    expect(log).toContain("RUNTIME READY");
    expect(log).not.toContain(secret);
    expect(log).not.toContain("Is the sky blue");
  });

  // Runs last in this file: it stops the altered runtime, which afterAll then finds already gone.
  it("exits 0 on SIGTERM", async () => {
    await altered.child.stop();
    expect(altered.child.proc.exitCode).toBe(0);
  });
});

describe("model files", () => {
  it("ensureModel serves the file SVC_MODEL_PATH names, with its digest", async () => {
    const path = join(workDir, "custom.gguf");
    await writeFile(path, "not really a model");
    vi.stubEnv("SVC_MODEL_PATH", path);
    try {
      expect(await ensureModel()).toEqual({ path, sha256: createHash("sha256").update("not really a model").digest("hex") });
      vi.stubEnv("SVC_MODEL_PATH", join(workDir, "missing.gguf"));
      await expect(ensureModel()).rejects.toThrow(/SVC_MODEL_PATH .*missing\.gguf is not a file/);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("cachedSha256 trusts <file>.sha256 while size and mtime match, and re-hashes after a change", async () => {
    const path = join(workDir, "weights.bin");
    await writeFile(path, "one");
    const first = await cachedSha256(path);
    expect(first).toBe(await sha256File(path));
    const record = JSON.parse(await readFile(`${path}.sha256`, "utf8")) as { sha256: string };
    expect(record.sha256).toBe(first);

    // A record that still matches the file's size and mtime is believed without reading the file.
    const planted = "e".repeat(64);
    await writeFile(`${path}.sha256`, JSON.stringify({ ...record, sha256: planted }));
    expect(await cachedSha256(path)).toBe(planted);

    await writeFile(path, "two!");
    expect(await cachedSha256(path)).toBe(await sha256File(path));
  });
});

describe("runtime app without a model (app.request)", () => {
  const identity: Identity = {
    release_id: "test-release",
    fingerprint: "f".repeat(64),
    rendering_version: RENDERING_VERSION,
    modalities: ["text"],
    max_tokens_per_pass: 64,
    engine: "fake",
  };
  // A fake for a fault the real engine cannot be made to show on demand.
  const failingEngine: ScoringEngine = {
    tokenize: () => ({ tokens: [], pieces: [] }),
    score: () => Promise.reject(new Error("GGML_ASSERT failed")),
    scoreGroup: () => Promise.reject(new Error("GGML_ASSERT failed")),
    sequences: 1,
    stats: () => ({ passes: 0, evaluatedTokens: 0, busyMs: 0 }),
  };

  it("answers an engine failure with 500 internal_error, logging the failure but not the prompt", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const app = createRuntimeApp(failingEngine, identity, () => ["s"]);
    const res = await app.request(RUNTIME_PATHS.score, {
      method: "POST",
      headers: { authorization: "Bearer s" },
      body: JSON.stringify({ segments: [{ text: "customer text", special: true }], label_tokens: [1] }),
    });
    expect(res.status).toBe(500);
    const { error } = ErrorEnvelope.parse(await res.json());
    expect(error.code).toBe("internal_error");
    expect(error.message).not.toContain("GGML");
    const lines = logged.mock.calls.flat().join("\n");
    logged.mockRestore();
    expect(lines).toContain("GGML_ASSERT failed");
    expect(lines).not.toContain("customer text");
  });

  it("answers an unknown path with a 404 envelope, after the secret check", async () => {
    const app = createRuntimeApp(failingEngine, identity, () => ["s"]);
    expect((await app.request("/v1/nope")).status).toBe(401);
    const res = await app.request("/v1/nope", { headers: { authorization: "Bearer s" } });
    expect(res.status).toBe(404);
    expect(ErrorEnvelope.parse(await res.json()).error.code).toBe("not_found");
  });

  it("refuses an empty secret", () => {
    expect(() => createRuntimeApp(failingEngine, identity, () => [""])).toThrow(/secret/);
  });
});

// ---------------------------------------------------------------------------------------------------

/**
 * Copies a GGUF, changing one character of its `general.name` metadata value in place: the copy is a
 * working model whose bytes, and so whose digest, differ from the original's.
 */
async function copyWithRenamedModel(from: string, to: string): Promise<void> {
  await copyFile(from, to);
  const file = await open(to, "r+");
  try {
    const head = Buffer.alloc(1 << 20);
    await file.read(head, 0, head.length, 0);
    // A GGUF key-value pair: u64 key length, key, u32 value type (8 = string), u64 length, value.
    const key = Buffer.from("general.name");
    const at = head.indexOf(key);
    expect(at).toBeGreaterThan(8);
    expect(head.readBigUInt64LE(at - 8)).toBe(BigInt(key.length));
    expect(head.readUInt32LE(at + key.length)).toBe(8);
    const length = Number(head.readBigUInt64LE(at + key.length + 4));
    const last = at + key.length + 12 + length - 1;
    await file.write(Buffer.from([head[last] === 0x78 ? 0x79 : 0x78]), 0, 1, last);
  } finally {
    await file.close();
  }
}

/** Whether this machine shows a GPU device (NVIDIA's or a render node) that a GPU build could use. */
function hasGpuDevice(): boolean {
  if (existsSync("/dev/nvidiactl")) return true;
  try {
    return readdirSync("/dev/dri").some((name) => name.startsWith("renderD"));
  } catch {
    return false;
  }
}

function authorized(): Record<string, string> {
  return { authorization: `Bearer ${secret}`, "content-type": "application/json" };
}

async function callRaw(runtime: Runtime, path: string, body: unknown): Promise<{ status: number; body: ErrorEnvelope }> {
  const res = await fetch(runtime.url + path, { method: "POST", headers: authorized(), body: JSON.stringify(body) });
  return { status: res.status, body: ErrorEnvelope.parse(await res.json()) };
}

async function call(runtime: Runtime, method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(runtime.url + path, { method, headers: authorized(), body: body === undefined ? undefined : JSON.stringify(body) });
  const json: unknown = await res.json();
  if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

async function tokenizeAll(texts: { text: string; special?: boolean }[]): Promise<TokenizeResponse> {
  return TokenizeResponse.parse(await call(main, "POST", RUNTIME_PATHS.tokenize, { texts }));
}

async function tokenize(text: string, special = true): Promise<Tokenized> {
  return (await tokenizeAll([{ text, special }])).results[0]!;
}

async function score(runtime: Runtime, prompt: string, label_tokens: number[]): Promise<ScoreResponse> {
  return ScoreResponse.parse(await call(runtime, "POST", RUNTIME_PATHS.score, { segments: [{ text: prompt, special: true }], label_tokens }));
}

/** Token ids of labels that must each be a single token. */
async function labelTokens(...labels: string[]): Promise<number[]> {
  return Promise.all(
    labels.map(async (label) => {
      const { tokens } = await tokenize(label);
      expect(tokens, `label ${JSON.stringify(label)}`).toHaveLength(1);
      return tokens[0]!;
    }),
  );
}

function chatTurn(user: string): string {
  return `<start_of_turn>user\n${user}<end_of_turn>\n<start_of_turn>model\n`;
}

/** A prompt of exactly `n` tokens: each chat marker is one special token. */
function markers(n: number): string {
  return "<start_of_turn>".repeat(n);
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
