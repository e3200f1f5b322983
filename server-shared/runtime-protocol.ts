/**
 * The runtime protocol: how a sidecar talks to a model runtime (server-only; no client sees it). This
 * file is its one description.
 *
 * A runtime hosts one release (a base model plus at most one adapter) and answers the calls below over
 * HTTP with JSON bodies. Every call carries `Authorization: Bearer <secret>`, the secret being the
 * value of the environment variable that the registry entry's `token_env` names. The sidecar refuses a
 * runtime URL that is plaintext `http://` to a non-loopback host (see `checkServiceUrl`).
 *
 *   GET  /v1/identity   -> Identity
 *        Which release this runtime serves. `fingerprint` is a SHA-256 digest over the weights file's
 *        SHA-256, the adapter file's SHA-256 (or "none") and RENDERING_VERSION, so it changes whenever
 *        any of them does. The sidecar compares `release_id` and `fingerprint` with the registry
 *        before admitting work.
 *
 *   POST /v1/tokenize   TokenizeRequest -> TokenizeResponse
 *        The runtime's own tokenizer, for every text of the request in one call: `results[i]` is
 *        `texts[i]` tokenized. Special-token markers in a text are parsed as special tokens only when
 *        its `special` is true; no beginning-of-sequence token is added. `pieces[j]` is the text that
 *        token j decodes to, so a caller can check that a label is one token that decodes to itself.
 *        The response carries the runtime's stamp (release id, fingerprint, per-pass limit), so that
 *        the one call a sidecar makes before admitting a request also verifies whom it talks to.
 *
 *   POST /v1/score      ScoreRequest -> ScoreResponse
 *        One pass. The prompt is a list of segments, tokenized one after the other; only segments
 *        marked `special` (the chat template's own markers) are parsed for special tokens, so
 *        customer text can never open or close a turn. The runtime prepends the model's
 *        beginning-of-sequence token (when it has one), evaluates the pass, and reads the next-token
 *        distribution at the answer position (right after the prompt). `logprobs[i]` is the
 *        log-probability of `label_tokens[i]` under the full-vocabulary softmax at temperature 1, so
 *        each value is <= 0 and their exponentials sum to at most 1; a probability that underflows
 *        the engine's float32 reads as LOGPROB_FLOOR, so every value is finite. `prompt_tokens` is the number of
 *        tokens evaluated (beginning-of-sequence token included); a pass over
 *        `identity.max_tokens_per_pass` is refused with 422 `pass_too_long` before evaluation. The
 *        response repeats the identity it was computed with, so every execution is verifiable.
 *        When the request's `hidden_state` is true, the response also carries `hidden_state`: the
 *        model's final hidden state at the answer position (after the output norm: what llama.cpp
 *        returns as that position's embedding with pooling none), `n_embd` finite numbers, read from
 *        the same pass with no second evaluation; trained heads on the frozen base model read it.
 *        It is absent when not asked for.
 *        `pooled_state` (default false; needs `hidden_state` and a prefix) also returns the prefix's
 *        (the rendered state's) final hidden states averaged: the prefix is then evaluated in pieces of
 *        POOL_STRIDE tokens (runtime/engine.ts) and the last position's state read after each, so the
 *        mean covers every POOL_STRIDE-th token and the prefix's last. A prefix kept from a pass that
 *        pooled is kept for pooled passes only (the pieces are another evaluation).
 *        `prefix_segments` (default 0) names the leading segments that are the pass's prefix, the
 *        part several passes share (the sidecar puts the rendered state there). The runtime then
 *        evaluates the prefix's tokens (the beginning-of-sequence token included) first and the rest
 *        after them, and keeps the prefix evaluated: a next pass with the same prefix tokens
 *        evaluates only its rest. A pass's numbers depend on its prefix and its rest only, never on
 *        what ran before it, hit or miss; they are not those of the same tokens with no prefix
 *        (llama.cpp's kernels are not batch-invariant, so where a pass is split moves its numbers:
 *        runtime/engine.ts). At least one segment must follow the prefix, and its tokens must not be
 *        none (422 `invalid_request`). `prefix_tokens` is the prefix's token count (0 without one),
 *        `evaluated_tokens` what this pass actually evaluated: `prompt_tokens`, less `prefix_tokens`
 *        when the prefix was kept from the pass before.
 *        `prefix_owner` (default "") names whom a kept prefix serves: a pass reuses the kept prefix
 *        only when it names the same owner, so a pass never runs faster because someone else sent
 *        the same prefix just before (a timing side channel between accounts). The sidecar names a
 *        digest of the account (sidecar/runtime/client.ts `ownedBy`); the runtime learns no id.
 *        A runtime evaluates one pass at a time; concurrent calls wait their turn.
 *
 *   POST /v1/score-group   ScoreGroupRequest -> ScoreGroupResponse
 *        Several passes in one call (at most GROUP_PASSES_MAX), each a ScoreRequest, answered in order
 *        as /v1/score answers it (`results[i]` for `passes[i]`, without the stamp, which the response
 *        carries once). A runtime of `identity.sequences` > 1 evaluates each distinct prefix once
 *        (owner and tokens alike; not at all when a sequence holds it already) and copies it to the
 *        other passes' sequences, then every pass's rest in as few decodes as its batch allows,
 *        `sequences` passes at a time. The rest's numbers are then not the one-pass numbers: llama.cpp's
 *        kernels are not batch-invariant, and a pass decoded beside others moves by up to
 *        GROUP_LOGPROB_TOLERANCE in a log-probability. Passes that ask for a hidden state, and every
 *        pass of a runtime of `sequences` 1, are evaluated one after another, as /v1/score evaluates
 *        them. A pass refused (422) refuses the whole call before anything is evaluated.
 *        The runtime works one turn at a time: `realtime: true` (a real-time execution's call) makes
 *        the whole call one turn, taken before every background turn waiting; any other call takes a
 *        turn for each chunk of `sequences` passes (each pass at `sequences` 1), and so does a
 *        /v1/score call. Real time thus waits behind at most the one background turn running.
 *
 *   POST /v1/image-features   ImageFeaturesRequest -> ImageFeaturesResponse   (an image runtime)
 *        One still image through the runtime's image backbone. The runtime reads the canonical PNG
 *        (sidecar/images/: 8-bit RGB, at most LIMITS.imageCanonicalPixels) through the read grant
 *        given, checks its length and SHA-256, scales it to the backbone's input (within the
 *        processor budget of LIMITS.imageInputPixels) and answers the backbone's pooled features
 *        and the visual tokens it processed: a visual token is one cell of the backbone's final
 *        feature map (IMAGE_TOKEN_PIXELS square of the input), the positions the features pool over.
 *        An image needing more visual tokens than `identity.max_tokens_per_pass` is refused with
 *        413 `context_too_large` before evaluation. An image runtime's identity lists the modality
 *        "image"; its fingerprint covers the backbone file and IMAGE_PREPROCESSING_VERSION. It
 *        answers no tokenize or score call (404), as a text runtime answers no image call.
 *
 *   POST /v1/embed      EmbedRequest -> EmbedResponse   (a text runtime with a sentence encoder)
 *        The text's sentence embedding by the runtime's sentence encoder (runtime/text-encoder.ts:
 *        the mean of its pieces' final states, L2-normalised; a text longer than the encoder's
 *        window read in windows and averaged), which a trained head may read beside the model's
 *        states. `encoder` is the encoder's fingerprint (its ONNX file's and vocabulary's SHA-256
 *        hashed together): a head trained on one encoder's embeddings is served only with that
 *        encoder. The encoder is not part of the runtime's `fingerprint` (what a model answers does
 *        not depend on it); the identity names it as `encoder`. A runtime without one answers 404
 *        `not_found`.
 *
 *   GET  /v1/stats      -> Stats
 *        Passes evaluated since the runtime started, the tokens they evaluated (kept prefixes not
 *        counted again) and the milliseconds spent evaluating them (for operators and benchmarks: the
 *        share of time the accelerator is busy, the work it did).
 *
 * Errors use the gateway's envelope (`contract/errors.ts`): 401 `unauthorized` for a missing or wrong
 * secret, 422 `invalid_request` for a malformed body or an out-of-vocabulary token id, 422
 * `pass_too_long`, 500 `internal_error` for an engine failure.
 */
import { z } from "zod";
import { fields, looseFields, orderedMap } from "../contract/fields.ts";
import { LIMITS } from "../contract/limits.ts";

/** Version of the sidecar's prompt rendering; part of every fingerprint. Bump it when rendering changes. */
export const RENDERING_VERSION = "render-v3";

export const Modality = z.enum(["text", "image"]);

export const Identity = z.object({
  release_id: z.string().min(1),
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  rendering_version: z.string().min(1),
  modalities: z.array(Modality).min(1),
  max_tokens_per_pass: z.number().int().positive(),
  /** Engine and version, for operators; not part of the identity comparison. */
  engine: z.string(),
  /** Passes one decode of `/v1/score-group` carries at most (absent: a runtime before groups, which has no such call). */
  sequences: z.number().int().positive().optional(),
  /** The sentence encoder `/v1/embed` runs (absent: none, and no such call). */
  encoder: z.object({ name: z.string(), fingerprint: z.string().regex(/^[0-9a-f]{64}$/), width: z.number().int().positive() }).optional(),
});
export type Identity = z.infer<typeof Identity>;

/** What every tokenize and score response repeats of the identity, so each one is verifiable. */
export const Stamp = z.object({ release_id: z.string(), fingerprint: z.string() });
export type Stamp = z.infer<typeof Stamp>;

export const TokenizeText = looseFields({ text: z.string(), special: z.boolean().default(false) });
export type TokenizeText = z.infer<typeof TokenizeText>;

/** Texts per tokenize call: a request's labels and over-long passes fit (see contract/limits.ts). */
export const TOKENIZE_TEXTS_MAX = 65_536;

export const TokenizeRequest = looseFields({ texts: z.array(TokenizeText).max(TOKENIZE_TEXTS_MAX) });
export type TokenizeRequest = z.infer<typeof TokenizeRequest>;

export const Tokenized = z.object({
  tokens: z.array(z.number().int().nonnegative()),
  pieces: z.array(z.string()),
});
export type Tokenized = z.infer<typeof Tokenized>;

export const TokenizeResponse = Stamp.extend({
  max_tokens_per_pass: z.number().int().positive(),
  results: z.array(Tokenized),
});
export type TokenizeResponse = z.infer<typeof TokenizeResponse>;

/** log of the smallest positive float32: what an underflowed probability reads as. */
export const LOGPROB_FLOOR = Math.log(1.401298464324817e-45);

export const Segment = looseFields({ text: z.string(), special: z.boolean() });
export type Segment = z.infer<typeof Segment>;

export const ScoreRequest = looseFields({
  segments: z.array(Segment).min(1).refine((segments) => segments.some((s) => s.text.length > 0), "the prompt is empty"),
  label_tokens: z.array(z.number().int().nonnegative()).min(1).max(1024),
  hidden_state: z.boolean().default(false),
  prefix_segments: z.number().int().nonnegative().default(0),
  pooled_state: z.boolean().default(false),
  prefix_owner: z.string().max(64).default(""),
}).refine((r) => r.prefix_segments < r.segments.length, { message: "prefix_segments must leave at least one segment after the prefix", path: ["prefix_segments"] });
/** What a caller sends: `hidden_state`, `prefix_segments`, `pooled_state` and `prefix_owner` may be left out (false, 0, false, ""). */
export type ScoreRequest = Omit<z.infer<typeof ScoreRequest>, "hidden_state" | "prefix_segments" | "pooled_state" | "prefix_owner"> & {
  hidden_state?: boolean;
  prefix_segments?: number;
  pooled_state?: boolean;
  prefix_owner?: string;
};

export const ScoreResponse = Stamp.extend({
  prompt_tokens: z.number().int().positive(),
  /** Absent from runtimes before prefixes (then read as 0 and `prompt_tokens`). */
  prefix_tokens: z.number().int().nonnegative().optional(),
  evaluated_tokens: z.number().int().positive().optional(),
  logprobs: z.array(z.number().max(0)),
  hidden_state: z.array(z.number()).optional(),
  pooled_state: z.array(z.number()).optional(),
});
export type ScoreResponse = z.infer<typeof ScoreResponse>;

/** Passes of one /v1/score-group call at most: a bulk execution's records (16), each with its content-free readings, fit. */
export const GROUP_PASSES_MAX = 64;

/**
 * The largest difference between a pass's log-probabilities in a group decode and in its own
 * evaluation (/v1/score): 0.95, the largest `npm run bench:group-numbers` measured (0.943, over 2,361
 * passes of the quality benchmark's sets and the training benchmark's items, as real-time requests
 * and as bulk groups; the CPU build, Gemma 3 270M Q4_K_M, 16 sequences). Between 3 % and 100 % of a
 * source's passes come out identical; the others move as a pass split into prefix and rest moves
 * (runtime/engine.ts): llama.cpp's CPU kernels round a token's row differently with the rows beside
 * it. The largest moves are of labels far below the answer; an answer's probability moved by 0.11
 * at most. The GPU builds are not measured.
 */
export const GROUP_LOGPROB_TOLERANCE = 0.95;

export const ScoreGroupRequest = looseFields({ passes: z.array(ScoreRequest).min(1).max(GROUP_PASSES_MAX), realtime: z.boolean().default(false) });
export type ScoreGroupRequest = { passes: ScoreRequest[]; realtime?: boolean };

export const PassResult = ScoreResponse.omit({ release_id: true, fingerprint: true });
export type PassResult = z.infer<typeof PassResult>;

export const ScoreGroupResponse = Stamp.extend({ results: z.array(PassResult) });
export type ScoreGroupResponse = z.infer<typeof ScoreGroupResponse>;

export const EmbedRequest = looseFields({ text: z.string() });
export type EmbedRequest = z.infer<typeof EmbedRequest>;

export const EmbedResponse = Stamp.extend({
  /** The encoder's fingerprint (Identity `encoder.fingerprint`). */
  encoder: z.string(),
  /** Pieces the encoder read, its markers included. */
  tokens: z.number().int().positive(),
  embedding: z.array(z.number()),
});
export type EmbedResponse = z.infer<typeof EmbedResponse>;

/** Version of the image runtime's preprocessing (crop, scale, normalisation); part of an image release's fingerprint. */
export const IMAGE_PREPROCESSING_VERSION = "image-v1";

/** The side of the square of model input that one visual token covers (the backbone's total stride). */
export const IMAGE_TOKEN_PIXELS = 32;

/** A signed URL and the headers to send with it, passed on to whoever reads or writes the object. */
export const PassedGrant = fields({ url: z.string(), headers: orderedMap(z.string(), z.string()) });

export const ImageFeaturesRequest = fields({
  /** GET of the canonical PNG (at most LIMITS.imageReadGrantMs). */
  image: PassedGrant,
  bytes: z.number().int().positive().max(LIMITS.imageCanonicalBytes),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type ImageFeaturesRequest = z.infer<typeof ImageFeaturesRequest>;
export type ImageFeaturesCall = z.input<typeof ImageFeaturesRequest>;

export const ImageFeaturesResponse = Stamp.extend({
  /** Visual tokens the backbone processed (IMAGE_TOKEN_PIXELS squares of its input). */
  visual_tokens: z.number().int().positive(),
  /** The model input's width times height, within LIMITS.imageInputPixels. */
  input_pixels: z.number().int().positive(),
  features: z.array(z.number()),
});
export type ImageFeaturesResponse = z.infer<typeof ImageFeaturesResponse>;

/** Bounds of a runtime call's body: a pass holds at most one decision body's state, plus the template. */
export const RUNTIME_BODY = { maxBytes: 4 * 1024 * 1024, maxDepth: 8 } as const;

export const Stats = z.object({
  passes: z.number().int().nonnegative(),
  /** Tokens evaluated, all passes together: a kept prefix is not counted again. */
  evaluated_tokens: z.number().int().nonnegative(),
  busy_ms: z.number().nonnegative(),
});
export type Stats = z.infer<typeof Stats>;

export const RUNTIME_PATHS = {
  identity: "/v1/identity",
  stats: "/v1/stats",
  tokenize: "/v1/tokenize",
  score: "/v1/score",
  scoreGroup: "/v1/score-group",
  imageFeatures: "/v1/image-features",
  embed: "/v1/embed",
} as const;
