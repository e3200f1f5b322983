/**
 * The public HTTP routes of the service, in one table: what contract/openapi.ts publishes and what a
 * test compares with the routes the edge Worker really registers. Every body schema is the
 * contract's own zod schema; nothing here restates a field.
 *
 *     { method: "post", path: "/v1/systemone", operationId: "createDecision", credential: "api_key",
 *       request: DecisionRequest, responses: { 200: DecisionResponse }, errors: [...] }
 *
 * Sidecar-only routes (`/internal/*`, the shared sidecar secret), the storage endpoint a signed
 * upload URL points at, and the health probe are not part of the public API and are not listed.
 */
import { z } from "zod";
import { Usage, USAGE_DAYS, UsageDay, UsageGrouping } from "./usage.ts";
import { Batch, BATCH_LIST_PAGE, BatchList, BatchStatus, CreateBatchRequest, ResultsPage } from "./batches.ts";
import { CalibrationReport } from "./calibration.ts";
import { DecisionRequest, DecisionResponse } from "./decision.ts";
import type { ErrorCode } from "./errors.ts";
import { fields } from "./fields.ts";
import { CreatedKey, CreateKeyRequest, KEY_ID_PATTERN, KeyList, KeyMetadata, SignInTarget } from "./keys.ts";
import { LIMITS } from "./limits.ts";
import { ModelList, RetiredModel } from "./models.ts";
import { CreateImageAssetRequest, IMAGE_REFUSALS, ImageAsset, ImageDecisionRequest } from "./images.ts";
import { ImageModelList } from "./image-models.ts";
import { CreditBalance } from "./credit.ts";
import { CreateTrainingRequest, EvaluationReport, LABEL_ISSUE_PAGE, LabelIssueList, Training, TRAINING_LIST_PAGE, TrainingList, TrainingStatus } from "./trainings.ts";
import { CreateWebhookRequest, DeletedWebhookEndpoint, WEBHOOK_LIMITS, WebhookDeliveryList, WebhookEndpoint, WebhookEndpointList, WebhookEndpointWithSecret } from "./webhooks.ts";

/**
 * Who may call a route: anyone, a signed-in user (identity-provider access token), an account API
 * key, or either of the last two (the image asset routes).
 */
export type Credential = "none" | "user_token" | "api_key" | "api_key_or_user_token";

/** A body that is not JSON: its media type and a short description (the SVG diagram, the reference page). */
export interface RawBody {
  mediaType: string;
  description: string;
}

export interface Parameter<S extends z.ZodType = z.ZodType> {
  name: string;
  in: "path" | "query";
  description: string;
  /** The value's schema; the edge validates the parameter's text with it (edge/params.ts). */
  schema: S;
}

export interface Route {
  method: "get" | "post" | "put" | "delete";
  /** OpenAPI form: `/v1/batches/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  credential: Credential;
  parameters?: Parameter[];
  /** The JSON body; `optional` for action routes whose body is `{}` and may be left out. */
  request?: { schema: z.ZodType; optional?: boolean };
  /** Success statuses and their bodies. */
  responses: Record<number, { description: string; body: z.ZodType | RawBody }>;
  /** Every error code the route can answer; the document groups them by status. */
  errors: readonly ErrorCode[];
  /** A route that exists only when an image flag is on (IMAGE_API or IMAGE_BROWSER); the served document lists it only then. */
  flag?: "images";
  /**
   * What an existing route adds where an image flag is on, in that variant of the document only: said
   * in its description, its errors listed, and a second body it takes (the request is either).
   */
  images?: { description: string; errors: readonly ErrorCode[]; request?: z.ZodType };
}

/**
 * The body of an action route (`submit`, `cancel`, `revoke`): `{}`, or nothing at all. A field in it
 * is refused (422): such a body carries nothing, and every body the document allows then fits the
 * route's `actionBodyBytes`.
 */
export const EmptyRequest = fields({});

/** The service's own OpenAPI document, as served (an object; contract/openapi.ts builds it). */
const OpenApiDocument = z.record(z.string(), z.unknown());

/** Any route: a bug or a missing setting is the server's fault. */
const SERVER: ErrorCode[] = ["internal_error", "unavailable"];
const API_KEY: ErrorCode[] = ["missing_credentials", "invalid_credentials", "revoked_key", "account_disabled", "wrong_credential_kind"];
/** The account's per-second quotas, admitted after the key (edge/auth/quota.ts). */
const QUOTA: ErrorCode[] = ["rate_limited", "quota_unavailable"];
const USER_TOKEN: ErrorCode[] = ["missing_credentials", "invalid_credentials", "wrong_credential_kind"];
/** An API key or a signed-in user's token (edge/auth/image.ts). */
const KEY_OR_USER: ErrorCode[] = [...new Set([...API_KEY, ...USER_TOKEN])];
const IMAGE_REFUSAL_CODES = Object.keys(IMAGE_REFUSALS) as (keyof typeof IMAGE_REFUSALS)[];

/** Every path and query parameter of the public routes, by what it names. */
export const PARAMETERS = {
  batchId: { name: "id", in: "path", description: "The batch id (a UUID).", schema: Batch.shape.id },
  keyId: { name: "id", in: "path", description: "The key id shown in listings.", schema: z.string().regex(KEY_ID_PATTERN) },
  modelName: { name: "model", in: "path", description: "A model name: an alias or a release id.", schema: z.string().min(1) },
  batchListLimit: {
    name: "limit",
    in: "query",
    description: "Batches per page.",
    schema: z.number().int().min(1).max(BATCH_LIST_PAGE.max).default(BATCH_LIST_PAGE.default),
  },
  batchListAfter: { name: "after", in: "query", description: "An earlier page's `next_cursor` (a batch id).", schema: Batch.shape.id.optional() },
  batchListStatus: { name: "status", in: "query", description: "Only the batches in this status.", schema: BatchStatus.optional() },
  usageStart: { name: "start", in: "query", description: `The first UTC day counted, YYYY-MM-DD: no later than \`end\`, at most ${USAGE_DAYS - 1} days before it (the default); otherwise 422.`, schema: UsageDay.optional() },
  usageEnd: { name: "end", in: "query", description: "The last UTC day counted, YYYY-MM-DD (default: today).", schema: UsageDay.optional() },
  usageGroupBy: { name: "group_by", in: "query", description: "`day`, `key`, or `day,key`.", schema: UsageGrouping.default(["day"]) },
  trainingId: { name: "id", in: "path", description: "The training id (a UUID).", schema: Training.shape.id },
  imageAssetId: { name: "id", in: "path", description: "The image asset id (a UUID).", schema: ImageAsset.shape.id },
  trainingListLimit: {
    name: "limit",
    in: "query",
    description: "Trainings per page.",
    schema: z.number().int().min(1).max(TRAINING_LIST_PAGE.max).default(TRAINING_LIST_PAGE.default),
  },
  trainingListAfter: { name: "after", in: "query", description: "An earlier page's `next_cursor` (a training id).", schema: Training.shape.id.optional() },
  trainingListStatus: { name: "status", in: "query", description: "Only the trainings in this status.", schema: TrainingStatus.optional() },
  labelIssueLimit: {
    name: "limit",
    in: "query",
    description: "Label issues per page.",
    schema: z.number().int().min(1).max(LABEL_ISSUE_PAGE.max).default(LABEL_ISSUE_PAGE.default),
  },
  labelIssueAfter: {
    name: "after",
    in: "query",
    description: "0, or the last `rank` of an earlier page.",
    schema: z.number().int().min(0).max(LABEL_ISSUE_PAGE.listed).default(0),
  },
  webhookId: { name: "id", in: "path", description: "The webhook endpoint id (a UUID).", schema: z.uuid() },
  deliveryListLimit: {
    name: "limit",
    in: "query",
    description: "Deliveries per page.",
    schema: z.number().int().min(1).max(WEBHOOK_LIMITS.page.max).default(WEBHOOK_LIMITS.page.default),
  },
  deliveryListAfter: { name: "after", in: "query", description: "The last delivery id of an earlier page.", schema: z.uuid().optional() },
  resultsAfter: {
    name: "after",
    in: "query",
    description: "0, or an earlier page's `next_cursor` (an input line number).",
    schema: z.number().int().min(0).max(LIMITS.bulkFileRecords).default(0),
  },
} as const satisfies Record<string, Parameter>;
const { batchId, modelName, trainingId, imageAssetId } = PARAMETERS;
const SVG: RawBody = { mediaType: "image/svg+xml", description: "An SVG image." };

export const ROUTES: readonly Route[] = [
  {
    method: "get",
    path: "/v1/openapi.json",
    operationId: "getOpenApiDocument",
    summary: "This OpenAPI document",
    tag: "Reference",
    credential: "none",
    responses: { 200: { description: "The OpenAPI 3.1 document of the public API.", body: OpenApiDocument } },
    errors: ["internal_error"],
  },
  {
    method: "get",
    path: "/docs",
    operationId: "getReferencePage",
    summary: "Human reference page for this document",
    tag: "Reference",
    credential: "none",
    responses: { 200: { description: "An HTML page that renders /v1/openapi.json; its scripts and styles are served by the service itself.", body: { mediaType: "text/html", description: "The reference page." } } },
    errors: ["internal_error"],
  },
  {
    method: "get",
    path: "/v1/sign-in",
    operationId: "getSignInTarget",
    summary: "Where the command-line tool's browser sign-in goes",
    tag: "Keys",
    credential: "none",
    responses: { 200: { description: "The identity provider, its public client id and the scope a user token needs.", body: SignInTarget } },
    errors: SERVER,
  },
  {
    method: "post",
    path: "/v1/keys",
    operationId: "createKey",
    summary: "Create an API key (the secret is shown this once)",
    tag: "Keys",
    credential: "user_token",
    request: { schema: CreateKeyRequest },
    responses: { 201: { description: "The new key's metadata and its secret.", body: CreatedKey } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/keys",
    operationId: "listKeys",
    summary: "List the account's keys, newest first",
    tag: "Keys",
    credential: "user_token",
    responses: { 200: { description: "Key metadata; never a secret.", body: KeyList } },
    errors: [...USER_TOKEN, ...SERVER],
  },
  {
    method: "post",
    path: "/v1/keys/{id}/revoke",
    operationId: "revokeKey",
    summary: "Revoke a key (repeatable)",
    tag: "Keys",
    credential: "user_token",
    parameters: [PARAMETERS.keyId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The revoked key's metadata.", body: KeyMetadata } },
    errors: [...USER_TOKEN, "not_found", "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/usage",
    operationId: "getUsage",
    summary: "What the account used, per UTC day and per API key: requests, batch records, tokens, image credit",
    tag: "Keys",
    credential: "user_token",
    parameters: [PARAMETERS.usageStart, PARAMETERS.usageEnd, PARAMETERS.usageGroupBy],
    responses: { 200: { description: `The account's usage over at most ${USAGE_DAYS} days.`, body: Usage } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "rate_limited", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/webhooks",
    operationId: "createWebhookEndpoint",
    summary: `Register an HTTPS endpoint for job events (at most ${WEBHOOK_LIMITS.endpoints} an account; the secret is shown at creation)`,
    tag: "Webhooks",
    credential: "user_token",
    request: { schema: CreateWebhookRequest },
    responses: { 201: { description: "The endpoint and its signing secret.", body: WebhookEndpointWithSecret } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "webhook_endpoint_limit", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/webhooks",
    operationId: "listWebhookEndpoints",
    summary: "List the account's webhook endpoints, newest first",
    tag: "Webhooks",
    credential: "user_token",
    responses: { 200: { description: "The endpoints; never a secret.", body: WebhookEndpointList } },
    errors: [...USER_TOKEN, "account_disabled", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/webhooks/{id}",
    operationId: "getWebhookEndpoint",
    summary: "A webhook endpoint",
    tag: "Webhooks",
    credential: "user_token",
    parameters: [PARAMETERS.webhookId],
    responses: { 200: { description: "The endpoint; never its secret.", body: WebhookEndpoint } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", ...SERVER],
  },
  {
    method: "delete",
    path: "/v1/webhooks/{id}",
    operationId: "deleteWebhookEndpoint",
    summary: "Delete a webhook endpoint (its pending deliveries are dropped)",
    tag: "Webhooks",
    credential: "user_token",
    parameters: [PARAMETERS.webhookId],
    responses: { 200: { description: "The endpoint is gone.", body: DeletedWebhookEndpoint } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/webhooks/{id}/rotate_secret",
    operationId: "rotateWebhookSecret",
    summary: "Give an endpoint a new signing secret (the previous one also signs for a day)",
    tag: "Webhooks",
    credential: "user_token",
    parameters: [PARAMETERS.webhookId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The endpoint and its new secret.", body: WebhookEndpointWithSecret } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/webhooks/{id}/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "An endpoint's delivery log, newest first",
    tag: "Webhooks",
    credential: "user_token",
    parameters: [PARAMETERS.webhookId, PARAMETERS.deliveryListLimit, PARAMETERS.deliveryListAfter],
    responses: { 200: { description: "One page of deliveries: each event, its attempts and the last outcome.", body: WebhookDeliveryList } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/models",
    operationId: "listModels",
    summary: "List the models the account may use",
    tag: "Models",
    credential: "api_key",
    responses: { 200: { description: "Release names, their aliases and, when calibrated, where the report is.", body: ModelList } },
    errors: [...API_KEY, ...QUOTA, ...SERVER],
  },
  {
    method: "get",
    path: "/v1/models/{model}/calibration",
    operationId: "getCalibrationReport",
    summary: "A calibrated release's calibration report",
    tag: "Models",
    credential: "api_key",
    parameters: [modelName],
    responses: { 200: { description: "The published calibration report.", body: CalibrationReport } },
    errors: [...API_KEY, ...QUOTA, "model_not_found", "not_found", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/models/{model}/calibration.svg",
    operationId: "getCalibrationDiagram",
    summary: "A calibrated release's reliability diagram",
    tag: "Models",
    credential: "api_key",
    parameters: [modelName],
    responses: { 200: { description: "The reliability diagram.", body: { mediaType: "image/svg+xml", description: "An SVG image." } } },
    errors: [...API_KEY, ...QUOTA, "model_not_found", "not_found", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/models/{model}/evaluation",
    operationId: "getEvaluationReport",
    summary: "A trained model's evaluation report (the account's own models)",
    tag: "Models",
    credential: "api_key",
    parameters: [modelName],
    responses: { 200: { description: "The report its training published.", body: EvaluationReport } },
    errors: [...API_KEY, ...QUOTA, "model_not_found", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/models/{model}/evaluation.svg",
    operationId: "getEvaluationDiagram",
    summary: "A trained model's reliability diagram",
    tag: "Models",
    credential: "api_key",
    parameters: [modelName],
    responses: { 200: { description: "The reliability diagram.", body: SVG } },
    errors: [...API_KEY, ...QUOTA, "model_not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/models/{model}/retire",
    operationId: "retireModel",
    summary: "Retire a trained model of the account (new requests for it answer 404)",
    tag: "Training",
    credential: "user_token",
    parameters: [modelName],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The model, retired.", body: RetiredModel } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "model_not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/trainings",
    operationId: "createTraining",
    summary: "Create a training job (idempotent by key) and get where to upload its labelled examples",
    tag: "Training",
    credential: "user_token",
    request: { schema: CreateTrainingRequest },
    responses: {
      201: { description: "A new training, with `upload` (a signed PUT of exactly `input_bytes` bytes for the JSONL training file).", body: Training },
      200: { description: "The training this idempotency key already made; `upload` only while no file has arrived.", body: Training },
    },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "idempotency_conflict", "active_training_limit", "stored_training_limit", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/trainings",
    operationId: "listTrainings",
    summary: "List the account's trainings, newest first",
    tag: "Training",
    credential: "user_token",
    parameters: [PARAMETERS.trainingListLimit, PARAMETERS.trainingListAfter, PARAMETERS.trainingListStatus],
    responses: { 200: { description: "One page of trainings.", body: TrainingList } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/trainings/{id}",
    operationId: "getTraining",
    summary: "A training's status, progress and held-out figures",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId],
    responses: { 200: { description: "The training.", body: Training } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/trainings/{id}/submit",
    operationId: "submitTraining",
    summary: "Queue an uploaded training",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The training, queued (or unchanged on a repeat).", body: Training } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "not_found", "model_not_found", "training_not_submittable", "upload_incomplete", "upload_mismatch", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/trainings/{id}/cancel",
    operationId: "cancelTraining",
    summary: "Cancel a training",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The training, cancelled (or unchanged when already terminal).", body: Training } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "not_found", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/trainings/{id}/report",
    operationId: "getTrainingReport",
    summary: "A training's evaluation report, accepted or rejected",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId],
    responses: { 200: { description: "The candidate's held-out figures beside the base's zero-shot answers.", body: EvaluationReport } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", "report_not_ready", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/trainings/{id}/label_issues",
    operationId: "listTrainingLabelIssues",
    summary: "The examples whose given label looks wrong, lowest label quality first",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId, PARAMETERS.labelIssueLimit, PARAMETERS.labelIssueAfter],
    responses: { 200: { description: "One page of the report's label audit, in its order.", body: LabelIssueList } },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "not_found", "report_not_ready", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/trainings/{id}/report.svg",
    operationId: "getTrainingDiagram",
    summary: "A training's reliability diagram",
    tag: "Training",
    credential: "user_token",
    parameters: [trainingId],
    responses: { 200: { description: "The reliability diagram.", body: SVG } },
    errors: [...USER_TOKEN, "account_disabled", "not_found", "report_not_ready", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/systemone",
    operationId: "createDecision",
    summary: "Answer typed questions about a state (real-time decision)",
    tag: "Decisions",
    credential: "api_key",
    request: { schema: DecisionRequest },
    responses: { 200: { description: "One answer per question, in the request's order.", body: DecisionResponse } },
    errors: [...API_KEY, ...QUOTA, "invalid_request", "task_mismatch", "model_not_found", "bad_gateway", "identity_mismatch", "timeout", "lane_full", ...SERVER],
    images: {
      description:
        "Where IMAGE_API is on, a request with `images: [{asset_id}]` is an image decision: one ready asset of the account, one `choice` question of 2-16 answers, " +
        "exactly the image model's saved question in its outcome order. Prepaid credit is reserved for the worst case before any GPU work (402 when it cannot be) " +
        "and settled at what was used. The answer adds `unknown_probability`.",
      errors: ["insufficient_credit", "not_found", "context_too_large"],
      request: ImageDecisionRequest,
    },
  },
  {
    method: "post",
    path: "/v1/batches",
    operationId: "createBatch",
    summary: "Create a bulk batch (idempotent by key) and get where to upload its input",
    tag: "Batches",
    credential: "api_key",
    request: { schema: CreateBatchRequest },
    responses: {
      201: { description: "A new batch, with `upload` (a signed PUT of exactly `input_bytes` bytes for the JSONL input).", body: Batch },
      200: { description: "The batch this idempotency key already made; `upload` only while no input has arrived.", body: Batch },
    },
    errors: [...API_KEY, ...QUOTA, "invalid_request", "idempotency_conflict", "active_batch_limit", "batch_storage_limit", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/batches",
    operationId: "listBatches",
    summary: "List the account's batches, newest first",
    tag: "Batches",
    credential: "api_key",
    parameters: [PARAMETERS.batchListLimit, PARAMETERS.batchListAfter, PARAMETERS.batchListStatus],
    responses: { 200: { description: "One page of batches.", body: BatchList } },
    errors: [...API_KEY, ...QUOTA, "invalid_request", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/batches/{id}",
    operationId: "getBatch",
    summary: "A batch's status, timestamps and counts",
    tag: "Batches",
    credential: "api_key",
    parameters: [batchId],
    responses: { 200: { description: "The batch.", body: Batch } },
    errors: [...API_KEY, ...QUOTA, "not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/batches/{id}/submit",
    operationId: "submitBatch",
    summary: "Queue an uploaded batch for processing",
    tag: "Batches",
    credential: "api_key",
    parameters: [batchId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The batch, queued (or unchanged on a repeat).", body: Batch } },
    errors: [...API_KEY, ...QUOTA, "invalid_request", "not_found", "batch_not_submittable", "upload_incomplete", "upload_mismatch", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/batches/{id}/cancel",
    operationId: "cancelBatch",
    summary: "Cancel a batch",
    tag: "Batches",
    credential: "api_key",
    parameters: [batchId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The batch, cancelled (or unchanged when already terminal).", body: Batch } },
    errors: [...API_KEY, ...QUOTA, "invalid_request", "not_found", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/batches/{id}/results",
    operationId: "listBatchResults",
    summary: "A finished batch's result records, in input order",
    tag: "Batches",
    credential: "api_key",
    parameters: [batchId, PARAMETERS.resultsAfter],
    responses: { 200: { description: "Up to one page of result records.", body: ResultsPage } },
    errors: [...API_KEY, ...QUOTA, "invalid_request", "not_found", "batch_not_finished", "results_expired", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/image-assets",
    operationId: "createImageAsset",
    summary: "Create an image asset and get where to upload the photo (image flags only)",
    tag: "Images",
    credential: "api_key_or_user_token",
    flag: "images",
    request: { schema: CreateImageAssetRequest },
    responses: {
      201: {
        description: "The new asset (`uploading`), with `upload`: a signed PUT bound to this object, the declared length and SHA-256, that cannot replace an upload and expires.",
        body: ImageAsset,
      },
    },
    // 429 image_asset_limit: LIMITS.imageAssetsStored kept, or LIMITS.imageAssetsPerMinute created in the last minute.
    errors: [...KEY_OR_USER, "invalid_request", "image_asset_limit", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/image-assets/{id}",
    operationId: "getImageAsset",
    summary: "An image asset (image flags only)",
    tag: "Images",
    credential: "api_key_or_user_token",
    flag: "images",
    parameters: [imageAssetId],
    responses: { 200: { description: "The asset.", body: ImageAsset } },
    errors: [...KEY_OR_USER, "not_found", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/image-assets/{id}/complete",
    operationId: "completeImageAsset",
    summary: "Check the uploaded photo and make it canonical (image flags only)",
    tag: "Images",
    credential: "api_key_or_user_token",
    flag: "images",
    parameters: [imageAssetId],
    request: { schema: EmptyRequest, optional: true },
    responses: { 200: { description: "The finalized asset (`ready`), the same on a repeat.", body: ImageAsset } },
    // 429 image_completion_limit: LIMITS.imageCompletionsAtOnce of the account's completions are being preprocessed.
    errors: [...KEY_OR_USER, "invalid_request", "not_found", "upload_incomplete", "asset_finalizing", "image_completion_limit", "upload_mismatch", ...IMAGE_REFUSAL_CODES, ...SERVER],
  },
  {
    method: "get",
    path: "/v1/image-models",
    operationId: "listImageModels",
    summary: "The signed-in user's image models, with their states and saved tasks (IMAGE_BROWSER only)",
    tag: "Images",
    credential: "user_token",
    flag: "images",
    responses: { 200: { description: "Every image training of the account with a result, newest first: training passed, API ready or rejected.", body: ImageModelList } },
    errors: [...USER_TOKEN, "account_disabled", ...SERVER],
  },
  {
    method: "post",
    path: "/v1/image-decisions",
    operationId: "createImageDecision",
    summary: "Classify one photo with an image model, from a signed-in session (IMAGE_BROWSER only)",
    tag: "Images",
    credential: "user_token",
    flag: "images",
    request: { schema: ImageDecisionRequest },
    responses: {
      200: {
        description: "The answer: the chosen answer, probabilities conditional on a known answer, `unknown_probability` and `confidence` (the concentration of the whole distribution).",
        body: DecisionResponse,
      },
    },
    errors: [...USER_TOKEN, "account_disabled", "invalid_request", "task_mismatch", "model_not_found", "not_found", "insufficient_credit", "context_too_large", "bad_gateway", "identity_mismatch", "timeout", "lane_full", ...SERVER],
  },
  {
    method: "get",
    path: "/v1/image-credit",
    operationId: "getImageCredit",
    summary: "The account's prepaid image credit and the published price (image flags only)",
    tag: "Images",
    credential: "api_key_or_user_token",
    flag: "images",
    responses: { 200: { description: "The balance new decisions may reserve, what decisions in flight hold, and the price per billable token.", body: CreditBalance } },
    errors: [...KEY_OR_USER, ...SERVER],
  },
];
