/**
 * The edge <-> sidecar protocol (server-only; the shared sidecar secret on every call).
 *
 *   POST /internal/decide   SidecarDecideRequest -> SidecarDecideResponse
 *        One real-time decision. The edge has authenticated, validated, budgeted, admitted and
 *        resolved the model to a release the account may use; it names only that release's id,
 *        fingerprint and row revision. The sidecar looks up the release's runtime address and secret
 *        in the registry itself (it is the only caller of a runtime), keeping each entry until the
 *        edge names a newer revision of its row, and re-checks only what it alone can know:
 *        exact token counts per rendered pass, the runtime's published limits and its identity.
 *        With `confirm`, the edge answered the key and the model from its cache (edge/auth/
 *        key-cache.ts): the sidecar reads them in Postgres while the passes run
 *        (server-shared/key-check.ts `keyStands`) and answers only if they still stand; otherwise
 *        409 SidecarStale, no answer and no usage, and the edge reads the key itself.
 *
 *   POST /internal/images/decide   SidecarImageDecideRequest -> SidecarDecideResponse
 *        One image decision with a trained image model (sidecar/images/decide.ts): the question
 *        checked against the model's saved task (422 `task_mismatch`), then, in the real-time lane,
 *        the image runtime's read of the canonical PNG (413 `context_too_large` when the image needs
 *        more visual tokens than the runtime takes) and the model's head. The edge has reserved the
 *        account's credit; it settles or releases it on this answer.
 *
 *   POST /internal/images/preprocess   PreprocessImageRequest -> PreprocessImageResponse
 *        One uploaded image checked and made canonical (sidecar/images/), under the finalization
 *        lease the edge holds: the sidecar reads the original and writes the canonical PNG through
 *        the two grants given, and answers what it found; the edge commits it. A refusal is an
 *        answer (200, ok: false), not an error.
 *
 *   GET  /internal/health   -> SidecarHealth
 *        sidecar->postgres, and sidecar->runtime identity for every release this sidecar serves.
 *
 * And the one call the other way, from a sidecar's bulk worker to the edge:
 *
 *   POST /internal/grants   GrantRequest -> Grant
 *        A short signed URL (LIMITS.workerGrantMs) to GET or DELETE one batch input object: the edge
 *        holds the storage signing key, the worker never holds a customer credential.
 *
 * Which sidecar serves a release is the registry's `sidecar_url`; a sidecar serves the releases
 * whose `sidecar_url` is its own SIDECAR_URL setting and refuses any other.
 */
import { z } from "zod";
import { Answer, Questions, State, Usage } from "../contract/decision.ts";
import { fields, looseFields, orderedMap } from "../contract/fields.ts";
import { LinkStatus } from "../contract/health.ts";
import { CanonicalImage, ImageFormat, ImageRefusalCode } from "../contract/images.ts";
import { LIMITS } from "../contract/limits.ts";
import { PassedGrant } from "./runtime-protocol.ts";

/** The release the edge resolved for the account. */
export const ResolvedRelease = fields({
  id: z.string(),
  fingerprint: z.string(),
  /** The release row's revision as the edge read it in this request (schema.sql). */
  revision: z.number().int().positive(),
});
export type ResolvedRelease = z.infer<typeof ResolvedRelease>;

/** What a sidecar executes: the state and the questions, in order (a decision request less its model). */
export const Decision = fields({ state: State, questions: Questions });
export type Decision = z.infer<typeof Decision>;

/** Sent with contract/json.ts's `stringifyJson`, read with `parseJson`: question and option order survive. */
export const SidecarDecideRequest = fields({
  release: ResolvedRelease,
  request: Decision,
  account_id: z.string().uuid(),
  key_id: z.string(),
  request_id: z.string(),
  /** Present when the edge read the key and the model from its cache: the model name the request gave, for the sidecar to confirm. */
  confirm: fields({ model: z.string() }).optional(),
});
export type SidecarDecideRequest = z.infer<typeof SidecarDecideRequest>;

/**
 * One image decision: a trained image model's release, the decision (one choice question, which the
 * sidecar checks against the model's saved task), and the asset's canonical PNG as the image runtime
 * will read it (a grant of at most LIMITS.imageReadGrantMs, its size and SHA-256). `key_id` is null
 * for a signed-in user's decision.
 */
export const SidecarImageDecideRequest = fields({
  release: ResolvedRelease,
  request: Decision,
  image: fields({ grant: PassedGrant, bytes: z.number().int().positive().max(LIMITS.imageCanonicalBytes), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  account_id: z.string().uuid(),
  key_id: z.string().nullable(),
  request_id: z.string(),
});
export type SidecarImageDecideRequest = z.infer<typeof SidecarImageDecideRequest>;
/** The request as the edge writes it (headers as plain objects). */
export type SidecarImageDecideCall = z.input<typeof SidecarImageDecideRequest>;

export const SidecarDecideResponse = looseFields({
  /** Question id -> answer, in the request's order. */
  answers: orderedMap(z.string(), Answer),
  usage: Usage,
  /** Runtime passes run; for operators and benchmarks, not part of the public response. */
  passes: z.number().int().positive(),
});
export type SidecarDecideResponse = z.infer<typeof SidecarDecideResponse>;

/** 409 to a `confirm` request whose key or model no longer stands as the edge kept it: nothing was answered or recorded. */
export const SidecarStale = fields({ stale: z.literal(true) });
export type SidecarStale = z.infer<typeof SidecarStale>;
export const SIDECAR_STALE_STATUS = 409;

export const SidecarHealth = looseFields({ links: z.array(LinkStatus) });


export const PreprocessImageRequest = fields({
  /** The format the asset's filename names; the file must be it. */
  declared: ImageFormat,
  source_bytes: z.number().int().positive().max(LIMITS.imageSourceBytes),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** GET of the original. */
  source: PassedGrant,
  /** PUT of this attempt's canonical PNG (if-none-match: *). */
  canonical: PassedGrant,
});
export type PreprocessImageRequest = z.infer<typeof PreprocessImageRequest>;
/** The request as the edge writes it (headers as plain objects). */
export type PreprocessImageCall = z.input<typeof PreprocessImageRequest>;

export const PreprocessImageResponse = z.union([
  looseFields({
    ok: z.literal(true),
    source: looseFields({ format: ImageFormat, width: z.number().int().positive(), height: z.number().int().positive() }),
    canonical: CanonicalImage,
  }),
  looseFields({ ok: z.literal(false), code: ImageRefusalCode, message: z.string() }),
]);
export type PreprocessImageResponse = z.infer<typeof PreprocessImageResponse>;

export const SIDECAR_PATHS = {
  health: "/internal/health",
  decide: "/internal/decide",
  preprocessImage: "/internal/images/preprocess",
  imageDecide: "/internal/images/decide",
  /** POST, no body (or `{}`): a job was submitted; the job workers look for work now (204). Only a hint: they also look every JOB_TIMING.idleMs. */
  wakeJobs: "/internal/jobs/wake",
} as const;

/** The edge's internal routes, called by sidecars with the sidecar secret. */
export const EDGE_INTERNAL_PATHS = { grants: "/internal/grants" } as const;

export const GrantRequest = fields({ object: z.string().max(1024), method: z.enum(["GET", "DELETE"]) });
export type GrantRequest = z.infer<typeof GrantRequest>;

export const Grant = z.object({ url: z.string(), method: z.enum(["GET", "DELETE"]), headers: z.record(z.string(), z.string()), expires_at: z.string() });
export type Grant = z.infer<typeof Grant>;

/** Bounds of an edge -> sidecar body: a decision request inside the call's envelope. */
export const SIDECAR_BODY = { maxBytes: 2 * 1024 * 1024, maxDepth: 36 } as const;
