/**
 * Image assets on the wire (the image vertical, part 1): a still photo uploaded once, checked and
 * made canonical on the GPU host, then named by its opaque id in image decisions (part 2). Edge,
 * sidecar, tests and SDKs import these.
 *
 *     POST /v1/image-assets {"purpose": "prediction", "filename": "cat.jpg", "source_bytes": 48213, "sha256": "<hex>"}
 *       -> 201 ImageAsset (status "uploading") with `upload: {url, method: "PUT", headers, expires_at}`
 *     curl -T cat.jpg -H "content-length: 48213" -H "if-none-match: *" -H "x-amz-checksum-sha256: <base64>" "$url"
 *     POST /v1/image-assets/{id}/complete {}   -> ImageAsset (status "ready"), or 422 naming the refusal
 *     GET  /v1/image-assets/{id}               -> ImageAsset
 *
 * Credentials: the owner's API key (setting IMAGE_API=on) or a signed-in user's access token
 * (IMAGE_BROWSER=on). With a flag off, its credential's image routes answer as if they did not exist.
 *
 * States: uploading --complete (upload checked, sidecar accepted the image)--> ready
 *         uploading --complete (sidecar refused the image)--> rejected (every later complete: the same 422)
 * An asset is deleted when its retention ends: LIMITS.imagePredictionRetentionMs after creation, or
 * LIMITS.imageTrainingRetentionMs after the end of the training job that took it (image training is
 * part 2; a job's need keeps the asset however old it is). From then on, and for another account,
 * every route answers the same 404.
 *
 * The filename is display metadata only: it never reaches a model, a prompt or a log. Its extension
 * (.jpg, .jpeg or .png) must agree with what the file turns out to be.
 */
import { z } from "zod";
import { Upload } from "./batches.ts";
import { OptionName, QuestionId, State, type DecisionRequest } from "./decision.ts";
import { fields, looseFields, orderedMap } from "./fields.ts";
import type { Json } from "./json.ts";
import { LIMITS } from "./limits.ts";

export const IMAGE_PURPOSES = ["prediction", "training"] as const;
export const ImagePurpose = z.enum(IMAGE_PURPOSES);
export type ImagePurpose = z.infer<typeof ImagePurpose>;

export const IMAGE_FORMATS = ["jpeg", "png"] as const;
export const ImageFormat = z.enum(IMAGE_FORMATS);
export type ImageFormat = z.infer<typeof ImageFormat>;

/** The format a filename's extension declares, or null for any other extension. */
export function formatOfFilename(filename: string): ImageFormat | null {
  const extension = /\.([A-Za-z]+)$/.exec(filename)?.[1]?.toLowerCase();
  return extension === "jpg" || extension === "jpeg" ? "jpeg" : extension === "png" ? "png" : null;
}

/**
 * A display name ending in .jpg, .jpeg or .png (any case), with no path separator and no control
 * character (C0, C1, U+2028/9; contract/json.ts already refuses lone surrogates). One pattern, so
 * that the published JSON Schema says exactly what is accepted.
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const FILENAME = /^[^\u0000-\u001f\u007f-\u009f\u2028\u2029/\\]*\.(?:[jJ][pP][eE]?[gG]|[pP][nN][gG])$/;

export const CreateImageAssetRequest = fields({
  purpose: ImagePurpose,
  filename: z
    .string()
    .min(1, "filename must not be empty")
    .max(LIMITS.imageFilenameChars, `filename must be at most ${LIMITS.imageFilenameChars} characters`)
    .regex(FILENAME, "filename must be a name (no path, no control character) ending in .jpg, .jpeg or .png: one still JPEG or PNG"),
  source_bytes: z
    .number()
    .int("source_bytes must be an integer")
    .min(1, "source_bytes must be at least 1")
    .max(LIMITS.imageSourceBytes, `source_bytes must be at most ${LIMITS.imageSourceBytes} (10 MiB)`),
  /** SHA-256 of the original file, 64 lowercase or uppercase hex digits. */
  sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "sha256 must be the file's SHA-256 as 64 hex digits")
    .transform((hex) => hex.toLowerCase()),
});
export type CreateImageAssetRequest = z.infer<typeof CreateImageAssetRequest>;

/**
 * Why an image was refused (422 on complete, and kept on the asset): each is decided before any
 * GPU work.
 */
export const IMAGE_REFUSALS = {
  image_unsupported: "not a JPEG or PNG file",
  image_type_mismatch: "the file's format is not the one its filename's extension names",
  image_truncated: "the file ends before the image does",
  image_animated: "an animated image (one still image only)",
  image_too_large: `more than ${LIMITS.imagePixels.toLocaleString("en-US")} pixels, or more than ${LIMITS.imageEdgePixels.toLocaleString("en-US")} pixels along an edge`,
  image_undecodable: "the image data cannot be decoded",
} as const;
export type ImageRefusal = keyof typeof IMAGE_REFUSALS;
export const ImageRefusalCode = z.enum(Object.keys(IMAGE_REFUSALS) as [ImageRefusal, ...ImageRefusal[]]);

export const IMAGE_ASSET_STATUSES = ["uploading", "ready", "rejected"] as const;
export const ImageAssetStatus = z.enum(IMAGE_ASSET_STATUSES);
export type ImageAssetStatus = z.infer<typeof ImageAssetStatus>;

/** The canonical image the runtime reads: upright, every metadata block removed, RGB PNG. */
export const CanonicalImage = z.object({
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  bytes: z.number().int().positive(),
  sha256: z.string(),
});
export type CanonicalImage = z.infer<typeof CanonicalImage>;

export const ImageAsset = z.object({
  id: z.string().uuid(),
  object: z.literal("image_asset"),
  purpose: ImagePurpose,
  status: ImageAssetStatus,
  /** Display metadata only. */
  filename: z.string(),
  source_bytes: z.number().int(),
  sha256: z.string(),
  created_at: z.string(),
  /**
   * When the asset and its files are deleted: 24 hours after creation, or, once a training job has
   * taken it, 30 days after that job ends (null while the job runs).
   */
  expires_at: z.string().nullable(),
  /** Once ready: the original's format and decoded size (upright). */
  source: z.object({ format: ImageFormat, width: z.number().int(), height: z.number().int() }).nullable(),
  canonical: CanonicalImage.nullable(),
  /** Once rejected: why (the code is also the 422's). */
  error: z.object({ code: ImageRefusalCode, message: z.string() }).nullable(),
  /** On create only: where to PUT the file, with exactly these headers. */
  upload: Upload.optional(),
});
export type ImageAsset = z.infer<typeof ImageAsset>;

/** The headers an image upload must carry, all of them signed into its URL. */
export function imageUploadHeaders(sourceBytes: number, sha256Hex: string): Record<string, string> {
  return {
    "content-length": String(sourceBytes),
    "if-none-match": "*",
    "x-amz-checksum-sha256": hexToBase64(sha256Hex),
  };
}

export function hexToBase64(hex: string): string {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return btoa(String.fromCharCode(...bytes));
}

/** The storage objects of an asset: the original as uploaded, and each finalization attempt's canonical PNG. */
export const imageObjects = {
  source: (id: string) => `images/${id}/source`,
  canonical: (id: string, attempt: number) => `images/${id}/canonical-${attempt}.png`,
};

/** An image asset's id as requests name it: a UUID (never a URL or the image's bytes). */
const ASSET_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** An image question's instructions or an answer's description: text (or null, or absent), at most LIMITS.imageQuestionTextChars. */
const ImageText = z.string().max(LIMITS.imageQuestionTextChars).nullable().optional();

/**
 * An image decision's body exactly as the service takes it (POST /v1/image-decisions, and
 * POST /v1/systemone with `images`): one image named by a finalized asset's id, exactly one `choice`
 * question of 2-16 named answers whose instructions and descriptions are text of at most 2,000
 * characters. The route reads a decision request and checks the rest with imageRequestViolation,
 * whose messages name the field; this schema is the served document's account of the same rules.
 */
export const ImageAnswers = orderedMap(OptionName, ImageText).refine((answers) => answers.size >= LIMITS.imageOutcomes.min && answers.size <= LIMITS.imageOutcomes.max);
export const ImageQuestions = orderedMap(QuestionId, z.strictObject({ type: z.literal("choice"), instructions: ImageText, criteria: ImageAnswers })).refine(
  (questions) => questions.size === 1,
);
export const ImageDecisionRequest = looseFields({
  model: z.string().min(1).max(200),
  state: State,
  questions: ImageQuestions,
  images: z.array(fields({ asset_id: z.string().regex(ASSET_ID) })).length(1),
});

/**
 * The 422 message of an image decision (or image training example) beyond its schema, or null: one
 * image named by a finalized asset's id, exactly one `choice` question of 2-16 named answers, its
 * instructions and each answer's description text (or null) of at most LIMITS.imageQuestionTextChars.
 */
export function imageRequestViolation(request: Pick<DecisionRequest, "images" | "questions">): string | null {
  const images = request.images ?? [];
  if (images.length !== 1) return `images: an image decision takes exactly one image (${images.length} given)`;
  if (!ASSET_ID.test(images[0]!.asset_id)) {
    return "images.0.asset_id: name an image by the id of a finalized image asset (POST /v1/image-assets); URLs and encoded images are not accepted";
  }
  if (request.questions.size !== 1) return `questions: an image decision asks exactly one question (${request.questions.size} given)`;
  const [id, question] = [...request.questions][0]!;
  const at = `questions.${id.slice(0, 40)}`;
  if (question.type !== "choice") return `${at}: an image decision asks a choice question, not ${question.type}`;
  const { min, max } = LIMITS.imageOutcomes;
  if (question.criteria.size < min || question.criteria.size > max) return `${at}.criteria: an image decision has ${min} to ${max} named answers (${question.criteria.size} given)`;
  const chars = LIMITS.imageQuestionTextChars;
  const textProblem = (value: Json | undefined) =>
    value !== undefined && value !== null && typeof value !== "string" ? "must be text in an image decision" : typeof value === "string" && value.length > chars ? `at most ${chars} characters in an image decision` : null;
  const instructions = textProblem(question.instructions);
  if (instructions) return `${at}.instructions: ${instructions}`;
  for (const [name, description] of question.criteria) {
    const problem = textProblem(description);
    if (problem) return `${at}.criteria.${name.slice(0, 40)}: a description ${problem}`;
  }
  return null;
}
