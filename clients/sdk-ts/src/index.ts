/**
 * @decision-service/sdk: the TypeScript client of the decision service (Node 20 or later).
 *
 *     import { Client, noul, choice } from "@decision-service/sdk";
 *     const client = new Client();   // SVC_API_KEY, SVC_BASE_URL, SVC_DEFAULT_MODEL
 *     const reply = await client.systemOne({
 *       state: { ticket: "I was charged twice" },
 *       questions: { refund: noul("Refund?"), topic: choice(["billing", "bug"]) },
 *     });
 *
 * Training (`client.trainings`, `client.models.retire`), the account's API keys (`client.keys`), its
 * usage (`client.usage`), its webhook endpoints (`client.webhooks`) and a session's image models
 * and decisions (`client.imageModels`, `client.imageDecisions`) take the signed-in user's access token instead of the API key:
 * `new Client({ accessToken })` or SVC_ACCESS_TOKEN. Image assets
 * (`client.imageAssets.upload("cat.jpg")`) and the image credit (`client.imageCredit`) take either.
 *
 * The key and deployment the `svc` tools use (their saved credentials) are a second entry point,
 * `@decision-service/sdk/settings` (settings.ts), so that this one never reads that file.
 */
export { Client, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, type ClientOptions } from "./client.ts";
export { MAX_RETRY_WAIT_MS, type Credential, type Fetch, type RequestOptions, type WithRequestId } from "./core.ts";
export {
  choice,
  noul,
  score,
  type Answer,
  type AnswerFor,
  type ChoiceAnswer,
  type ChoiceQuestion,
  type DecisionRequest,
  type DecisionResponse,
  type Description,
  type Instructions,
  type JsonInput,
  type JsonValue,
  type NoulAnswer,
  type NoulQuestion,
  type Question,
  type Questions,
  type ScoreAnswer,
  type ScoreQuestion,
  type Usage,
} from "./decisions.ts";
export {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  ConfigurationError,
  ConflictError,
  GatewayTimeoutError,
  GoneError,
  ImageRefusedError,
  InputError,
  NotFoundError,
  OverloadedError,
  PayloadTooLargeError,
  PaymentRequiredError,
  PermissionDeniedError,
  RateLimitError,
  ServiceUnavailableError,
  UnprocessableEntityError,
  WebhookVerificationError,
} from "./errors.ts";
export { type BatchInput, type InputRecord } from "./input.ts";
export { Batches, type BatchRun, type CreateBatchParams, type ListBatchesParams, type RunOptions, type WaitOptions } from "./resources/batches.ts";
export { DEFAULT_POLL_INTERVAL_MS, type Metadata, type UploadResult } from "./resources/jobs.ts";
export { ImageAssets, type ImageFile, type UploadImageParams } from "./resources/image-assets.ts";
export { ImageCredit } from "./resources/image-credit.ts";
export { ImageDecisions, type ImageDecisionRequest } from "./resources/image-decisions.ts";
export { ImageModels } from "./resources/image-models.ts";
export { Keys, type CreateKeyParams } from "./resources/keys.ts";
export { Models } from "./resources/models.ts";
export { ResultStream, type ResultRecord, type ResultsPage } from "./resources/results.ts";
export { PagePromise, type CursorPage, type ListPage } from "./resources/pages.ts";
export {
  Trainings,
  type CreateTrainingParams,
  type ListLabelIssuesParams,
  type ListTrainingsParams,
  type RankedLabelIssue,
  type TrainingWaitOptions,
} from "./resources/trainings.ts";
export { type TrainingExample, type TrainingInput } from "./training-input.ts";
export { UsageReports, type RetrieveUsageParams } from "./resources/usage.ts";
export {
  WebhookDeliveries,
  Webhooks,
  type CreateWebhookParams,
  type ListDeliveriesParams,
  type VerifyOptions,
  type WebhookEventName,
  type WebhookHeaders,
} from "./resources/webhooks.ts";
export { VERSION } from "./version.ts";
export { BATCH_STATUSES, TERMINAL_STATUSES, isTerminal, type Batch, type BatchList, type BatchStatus, type Upload } from "../../../contract/batches.ts";
export type { ModelItem, ModelList, RetiredModel } from "../../../contract/models.ts";
export { KEY_MODELS_MAX, KEY_NAME_MAX, KEY_SCOPES, type CreatedKey, type KeyList, type KeyMetadata, type KeyScope } from "../../../contract/keys.ts";
export {
  isTrainingTerminal,
  LABEL_ISSUE_PAGE,
  TRAINING_LIMITS,
  TRAINING_STATUSES,
  TRAINING_TERMINAL_STATUSES,
  type EvaluationReport,
  type LabelAudit,
  type LabelIssue,
  type LabelIssueList,
  type QuestionEvaluation,
  type QuestionFigures,
  type Training,
  type TrainingList,
  type TrainingProgress,
  type TrainingStatus,
} from "../../../contract/trainings.ts";
export {
  IMAGE_ASSET_STATUSES,
  IMAGE_FORMATS,
  IMAGE_PURPOSES,
  IMAGE_REFUSALS,
  type CanonicalImage,
  type CreateImageAssetRequest,
  type ImageAsset,
  type ImageAssetStatus,
  type ImageFormat,
  type ImagePurpose,
  type ImageRefusal,
} from "../../../contract/images.ts";
export { IMAGE_MODEL_STATES, type ImageModel, type ImageModelList, type ImageModelState } from "../../../contract/image-models.ts";
export type { CreditBalance } from "../../../contract/credit.ts";
// The contract's `Usage` (GET /v1/usage) is `UsageReport` here: `Usage` is a decision's token usage.
export { USAGE_DAYS, USAGE_GROUPS, type Usage as UsageReport, type UsageBucket, type UsageCounts, type UsageGroup } from "../../../contract/usage.ts";
export {
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  type DeletedWebhookEndpoint,
  type WebhookDelivery,
  type WebhookDeliveryList,
  type WebhookEndpoint,
  type WebhookEndpointList,
  type WebhookEndpointWithSecret,
  type WebhookEvent,
} from "../../../contract/webhooks.ts";
export { WEBHOOK_TOLERANCE_SECONDS } from "../../../contract/webhook-signature.ts";
export { IMAGE_BASE_ALIAS, LIMITS, SHARED_ALIAS, REQUEST_ID_HEADER } from "../../../contract/limits.ts";
export { METADATA_LIMITS } from "../../../contract/jobs.ts";
