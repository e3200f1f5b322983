/**
 * Helpers for the Python SDK's test (runs only in tests): a virtual environment under
 * .local/python-sdk-venv with the package and its pinned tools installed, a command run in it, and
 * the contract's JSON Schemas and constants dumped for the SDK's model check.
 *
 *     const venv = await pythonSdkVenv();
 *     const { code, output } = await runTool(venv.bin("pytest"), ["-q"], { cwd: PYTHON_SDK_DIR, env });
 */
import { join } from "node:path";
import { z } from "zod";
import { BATCH_LIST_PAGE, BATCH_STATUSES, Batch, BatchList, ResultRecord, ResultsPage, TERMINAL_STATUSES } from "../../contract/batches.ts";
import { CreditBalance } from "../../contract/credit.ts";
import { ChoiceAnswer, DecisionResponse, NoulAnswer, ScoreAnswer, Usage } from "../../contract/decision.ts";
import { Usage as UsageReport } from "../../contract/usage.ts";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { IMAGE_MODEL_STATES, ImageModel, ImageModelList } from "../../contract/image-models.ts";
import { CreateImageAssetRequest, IMAGE_ASSET_STATUSES, IMAGE_PURPOSES, IMAGE_REFUSALS, ImageAsset } from "../../contract/images.ts";
import { IMAGE_BASE_ALIAS, LIMITS, REQUEST_ID_HEADER, SHARED_ALIAS } from "../../contract/limits.ts";
import { METADATA_LIMITS } from "../../contract/jobs.ts";
import { ModelItem, ModelList, RetiredModel } from "../../contract/models.ts";
import { CreatedKey, CreateKeyRequest, KEY_MODELS_MAX, KEY_SCOPES, KeyList, KeyMetadata } from "../../contract/keys.ts";
import { EvaluationReport, LabelIssueList, Training, TRAINING_LIST_PAGE, TRAINING_STATUSES, TRAINING_TERMINAL_STATUSES, TrainingList } from "../../contract/trainings.ts";
import { WEBHOOK_TOLERANCE_SECONDS } from "../../contract/webhook-signature.ts";
import {
  CreateWebhookRequest,
  DeletedWebhookEndpoint,
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from "../../contract/webhooks.ts";
import { must, pythonVenv, ROOT } from "./python-venv.ts";

export { runTool, type ToolRun } from "./python-venv.ts";

export const PYTHON_SDK_DIR = join(ROOT, "clients", "sdk-python");
export const VENV_DIR = join(ROOT, ".local", "python-sdk-venv");

/**
 * The venv, made once and reused: the pinned tools of requirements-dev.txt are installed again only
 * when that file changes; the package itself is built and installed (not editable) on every call.
 */
export async function pythonSdkVenv(): Promise<{ bin(name: string): string }> {
  const venv = await pythonVenv("python-sdk-venv", join(PYTHON_SDK_DIR, "requirements-dev.txt"), { marker: "requirements-dev.sha256" });
  // hatchling is pinned in requirements-dev.txt, so the build needs no download of its own.
  await must(venv.bin("python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-build-isolation", "--no-deps", "--force-reinstall", PYTHON_SDK_DIR]);
  return venv;
}

/**
 * The contract's schemas as JSON Schema components (named like the exports): the answers as the
 * service writes them, the requests the SDK checks before sending as the service reads them; and
 * its constants.
 */
export function contractDump(): object {
  const schemas = {
    DecisionResponse,
    NoulAnswer,
    ChoiceAnswer,
    ScoreAnswer,
    Usage,
    // GET /v1/usage's answer: the SDKs name it UsageReport (Usage is a decision's token counts).
    UsageReport,
    ModelList,
    ModelItem,
    Batch,
    BatchList,
    ResultRecord,
    ResultsPage,
    ErrorEnvelope,
    Training,
    TrainingList,
    EvaluationReport,
    LabelIssueList,
    RetiredModel,
    ImageAsset,
    ImageModel,
    ImageModelList,
    CreditBalance,
    KeyMetadata,
    CreatedKey,
    KeyList,
    WebhookEndpoint,
    WebhookEndpointWithSecret,
    WebhookEndpointList,
    DeletedWebhookEndpoint,
    // What an endpoint receives (no route answers it): the body `webhooks.verify` reads.
    WebhookEvent,
    WebhookDelivery,
    WebhookDeliveryList,
  };
  const requests = { CreateImageAssetRequest, CreateKeyRequest, CreateWebhookRequest };
  return {
    components: {
      schemas: {
        ...Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, z.toJSONSchema(schema, { io: "output", unrepresentable: "any" })])),
        ...Object.fromEntries(Object.entries(requests).map(([name, schema]) => [name, z.toJSONSchema(schema, { io: "input", unrepresentable: "any" })])),
      },
    },
    constants: {
      SHARED_ALIAS,
      REQUEST_ID_HEADER,
      toolRequestTimeoutMs: LIMITS.toolRequestTimeoutMs,
      httpConnectionsPerService: LIMITS.httpConnectionsPerService,
      bulkFileBytes: LIMITS.bulkFileBytes,
      bulkFileRecords: LIMITS.bulkFileRecords,
      batchListPageDefault: BATCH_LIST_PAGE.default,
      BATCH_STATUSES,
      TERMINAL_STATUSES,
      trainingFileBytes: LIMITS.trainingFileBytes,
      trainingFileExamples: LIMITS.trainingFileExamples,
      trainingListPageDefault: TRAINING_LIST_PAGE.default,
      TRAINING_STATUSES,
      TRAINING_TERMINAL_STATUSES,
      imageSourceBytes: LIMITS.imageSourceBytes,
      imageFilenameChars: LIMITS.imageFilenameChars,
      IMAGE_PURPOSES,
      IMAGE_ASSET_STATUSES,
      IMAGE_REFUSALS,
      IMAGE_BASE_ALIAS,
      IMAGE_MODEL_STATES,
      KEY_SCOPES,
      KEY_MODELS_MAX,
      METADATA_LIMITS,
      WEBHOOK_EVENTS,
      WEBHOOK_DELIVERY_STATUSES,
      webhookEndpoints: WEBHOOK_LIMITS.endpoints,
      WEBHOOK_TOLERANCE_SECONDS,
    },
  };
}
