/**
 * The OpenAPI 3.1 document of the public API, generated from the contract: the route table
 * (contract/routes.ts) and the contract's own schemas as JSON Schema (contract/json-schema.ts, the
 * converter the MCP server's tools use too). The edge serves it at GET /v1/openapi.json; clients and
 * tests import it.
 *
 *     const doc = openApiDocument();
 *     doc.components.schemas.DecisionRequest;   // the request body as JSON Schema (draft 2020-12)
 *
 * Request schemas are the input side of their zod schema (defaults make fields optional), response
 * schemas the output side.
 */
import { z } from "zod";
import { JobError } from "./jobs.ts";
import { Batch, BatchLimits, BatchList, BatchStatus, CreateBatchRequest, InputRecord, RecordError, ResultRecord, ResultsPage, Upload } from "./batches.ts";
import { CalibrationReport } from "./calibration.ts";
import { Answer, DecisionRequest, DecisionResponse, Question, Usage } from "./decision.ts";
import { ERROR_STATUS, ErrorEnvelope, type ErrorCode } from "./errors.ts";
import { jsonSchemaOf, type Io, type JsonSchema } from "./json-schema.ts";
import { CreatedKey, CreateKeyRequest, KeyList, KeyMetadata, SignInTarget } from "./keys.ts";
import { LIMITS, REQUEST_ID_HEADER } from "./limits.ts";
import { CreateImageAssetRequest, ImageAsset, ImageDecisionRequest } from "./images.ts";
import { ImageModel, ImageModelList } from "./image-models.ts";
import { CreditBalance } from "./credit.ts";
import { ModelItem, ModelList } from "./models.ts";
import { EmptyRequest, ROUTES, type Credential, type Route } from "./routes.ts";
import { WEBHOOK_TOLERANCE_SECONDS } from "./webhook-signature.ts";
import {
  CreateWebhookRequest,
  DeletedWebhookEndpoint,
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from "./webhooks.ts";

export const OPENAPI_PATH = "/v1/openapi.json";
export const DOCS_PATH = "/docs";

/**
 * Components by the contract's export names, each converted on the side it travels: requests as
 * clients send them, responses as the service writes them.
 */
const COMPONENTS: Record<string, { schema: z.ZodType; io: Io }> = {
  DecisionRequest: { schema: DecisionRequest, io: "input" },
  CreateWebhookRequest: { schema: CreateWebhookRequest, io: "input" },
  WebhookEndpoint: { schema: WebhookEndpoint, io: "output" },
  WebhookEndpointWithSecret: { schema: WebhookEndpointWithSecret, io: "output" },
  WebhookEndpointList: { schema: WebhookEndpointList, io: "output" },
  DeletedWebhookEndpoint: { schema: DeletedWebhookEndpoint, io: "output" },
  WebhookDelivery: { schema: WebhookDelivery, io: "output" },
  WebhookDeliveryList: { schema: WebhookDeliveryList, io: "output" },
  WebhookEvent: { schema: WebhookEvent, io: "output" },
  Question: { schema: Question, io: "input" },
  DecisionResponse: { schema: DecisionResponse, io: "output" },
  Answer: { schema: Answer, io: "output" },
  Usage: { schema: Usage, io: "output" },
  ModelList: { schema: ModelList, io: "output" },
  ModelItem: { schema: ModelItem, io: "output" },
  CalibrationReport: { schema: CalibrationReport, io: "output" },
  CreateKeyRequest: { schema: CreateKeyRequest, io: "input" },
  CreatedKey: { schema: CreatedKey, io: "output" },
  KeyMetadata: { schema: KeyMetadata, io: "output" },
  KeyList: { schema: KeyList, io: "output" },
  SignInTarget: { schema: SignInTarget, io: "output" },
  CreateBatchRequest: { schema: CreateBatchRequest, io: "input" },
  EmptyRequest: { schema: EmptyRequest, io: "input" },
  Batch: { schema: Batch, io: "output" },
  BatchStatus: { schema: BatchStatus, io: "output" },
  BatchLimits: { schema: BatchLimits, io: "output" },
  JobError: { schema: JobError, io: "output" },
  Upload: { schema: Upload, io: "output" },
  BatchList: { schema: BatchList, io: "output" },
  InputRecord: { schema: InputRecord, io: "input" },
  ResultRecord: { schema: ResultRecord, io: "output" },
  RecordError: { schema: RecordError, io: "output" },
  ResultsPage: { schema: ResultsPage, io: "output" },
  ErrorEnvelope: { schema: ErrorEnvelope, io: "output" },
  CreateImageAssetRequest: { schema: CreateImageAssetRequest, io: "input" },
  ImageAsset: { schema: ImageAsset, io: "output" },
  ImageDecisionRequest: { schema: ImageDecisionRequest, io: "input" },
  ImageModel: { schema: ImageModel, io: "output" },
  ImageModelList: { schema: ImageModelList, io: "output" },
  CreditBalance: { schema: CreditBalance, io: "output" },
};

const SECURITY: Record<"api_key" | "user_token", { name: string; scheme: JsonSchema }> = {
  api_key: {
    name: "apiKey",
    scheme: { type: "http", scheme: "bearer", bearerFormat: "svc_<id>_<secret>", description: "An account API key (create one with POST /v1/keys): `Authorization: Bearer svc_...`." },
  },
  user_token: {
    name: "userToken",
    scheme: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description: "A signed-in user's access token from the identity provider named by GET /v1/sign-in: key management, trainings, and the image routes when IMAGE_BROWSER is on.",
    },
  },
};

/** Response headers of the edge: the request id on every response, and what a refused or full service says about retrying. */
export const RESPONSE_HEADERS: Record<string, { description: string; schema: JsonSchema }> = {
  [REQUEST_ID_HEADER]: { description: "The request's id, on every response (errors included); quote it when reporting a problem.", schema: { type: "string" } },
  "retry-after": { description: "Seconds to wait before retrying (429 quotas; 503 and 529 answer 1).", schema: { type: "integer", minimum: 0 } },
  "retry-after-ms": { description: "Milliseconds to wait before retrying (429): the precise form of `retry-after`.", schema: { type: "integer", minimum: 0 } },
  "x-ratelimit-limit-requests": { description: "The account's `requests_per_second` quota, when that is the limit reached (429 `rate_limited`).", schema: { type: "integer" } },
  "x-ratelimit-limit-tokens": { description: "The account's `tokens_per_second` quota, when that is the limit reached (429 `rate_limited`).", schema: { type: "integer" } },
};

/** The headers each error status carries besides the request id. */
const RETRY_HEADERS: Record<number, string[]> = {
  429: ["retry-after", "retry-after-ms", "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"],
  503: ["retry-after"],
  529: ["retry-after"],
};

const STATUS_TEXT: Record<number, string> = {
  400: "Bad request",
  401: "Missing, invalid or revoked credential",
  403: "Forbidden",
  404: "Not found",
  409: "Conflict with the batch's state",
  410: "Gone",
  411: "Length required",
  412: "Precondition failed",
  413: "Payload too large",
  422: "Invalid request",
  429: "Quota or limit reached: back off and honour Retry-After",
  500: "Internal error",
  502: "Bad gateway",
  503: "Unavailable: retry shortly",
  504: "The execution wait elapsed",
  529: "The lane is full: retry shortly",
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const headerRefs = (names: string[]) => Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
const componentName = new Map([...Object.entries(COMPONENTS)].map(([name, { schema }]) => [schema, name]));

/** A body as a component reference, or as an inline schema when the contract has no name for it. */
function bodySchema(schema: z.ZodType, io: Io): JsonSchema {
  const name = componentName.get(schema);
  return name ? ref(name) : jsonSchemaOf(schema, io);
}

/** Error responses of a route, one per status, each listing its codes. */
function errorResponses(codes: readonly ErrorCode[]): Record<string, JsonSchema> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  const statuses = [...byStatus.keys()].sort((a, b) => a - b);
  return Object.fromEntries(
    statuses.map((status) => {
      const list = byStatus.get(status)!;
      return [
        String(status),
        {
          description: `${STATUS_TEXT[status] ?? "Error"}. \`error.code\`: ${list.map((code) => `\`${code}\``).join(", ")}.`,
          headers: headerRefs([REQUEST_ID_HEADER, ...(RETRY_HEADERS[status] ?? [])]),
          content: { "application/json": { schema: ref("ErrorEnvelope") } },
          "x-error-codes": list,
        },
      ];
    }),
  );
}

/** The route's security requirement: alternatives, each one scheme. */
function securityOf(credential: Credential): Record<string, string[]>[] {
  if (credential === "none") return [];
  if (credential === "api_key_or_user_token") return [{ [SECURITY.api_key.name]: [] }, { [SECURITY.user_token.name]: [] }];
  return [{ [SECURITY[credential].name]: [] }];
}

function operation(route: Route, images: boolean): JsonSchema {
  const extra = images ? route.images : undefined;
  const success = Object.entries(route.responses).map(([status, { description, body }]) => [
    status,
    {
      description,
      headers: headerRefs([REQUEST_ID_HEADER]),
      content: body instanceof z.ZodType ? { "application/json": { schema: bodySchema(body, "output") } } : { [body.mediaType]: { schema: { type: "string", description: body.description } } },
    },
  ]);
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(extra ? { description: extra.description } : {}),
    tags: [route.tag],
    security: securityOf(route.credential),
    ...(route.parameters
      ? {
          parameters: route.parameters.map((p) => ({
            name: p.name,
            in: p.in,
            required: p.in === "path",
            description: p.description,
            schema: jsonSchemaOf(p.schema, "input"),
          })),
        }
      : {}),
    ...(route.request
      ? {
          requestBody: {
            required: !route.request.optional,
            content: {
              "application/json": {
                schema: extra?.request
                  ? { oneOf: [bodySchema(route.request.schema, "input"), bodySchema(extra.request, "input")] }
                  : bodySchema(route.request.schema, "input"),
              },
            },
          },
        }
      : {}),
    responses: { ...Object.fromEntries(success), ...errorResponses([...route.errors, ...(extra?.errors ?? [])]) },
  };
}

/** What the service POSTs to an account's webhook endpoints (contract/webhooks.ts), as OpenAPI 3.1 describes outgoing calls. */
const WEBHOOKS: JsonSchema = {
  jobEnded: {
    post: {
      summary: "A batch or a training entered a terminal status",
      description:
        `Sent to each endpoint subscribed to the event (${WEBHOOK_EVENTS.join(", ")}), at least once: drop repeats by \`webhook-id\`. ` +
        "Signed in the Standard Webhooks format: `webhook-signature` is `v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<raw body>\">`, keyed with the base64 after `whsec_` of the endpoint's secret, " +
        `space-separated when the previous secret also signs (${WEBHOOK_LIMITS.previousSecretMs / 3_600_000} hours after a rotation). Refuse a timestamp more than ${WEBHOOK_TOLERANCE_SECONDS} s from now. ` +
        `A 2xx answer within ${WEBHOOK_LIMITS.attemptTimeoutMs / 1000} s delivers it; anything else is tried again ${WEBHOOK_LIMITS.retryDelaysMs.length} times over about a day.`,
      parameters: [
        { name: "webhook-id", in: "header", required: true, description: "The event's id, the same on every attempt.", schema: { type: "string" } },
        { name: "webhook-timestamp", in: "header", required: true, description: "This attempt's time, in Unix seconds.", schema: { type: "string", pattern: "^[0-9]+$" } },
        { name: "webhook-signature", in: "header", required: true, description: "`v1,<base64>`, one per signing secret, space-separated.", schema: { type: "string" } },
      ],
      requestBody: { required: true, content: { "application/json": { schema: ref("WebhookEvent") } } },
      responses: { "2XX": { description: "Received; no further attempt." } },
    },
  },
};

const cached = new Map<boolean, JsonSchema>();

/**
 * The whole document (built once per variant; treat it as read-only). The image routes are in it
 * only with `images` (a deployment with an image flag on serves that variant).
 */
export function openApiDocument(
  opts: { images?: boolean } = {},
): JsonSchema & { paths: Record<string, Record<string, JsonSchema>>; components: { schemas: Record<string, JsonSchema> } } {
  const images = opts.images ?? false;
  if (!cached.has(images)) cached.set(images, build(images));
  return cached.get(images) as ReturnType<typeof openApiDocument>;
}

function build(images: boolean): JsonSchema {
  const routes = ROUTES.filter((route) => route.flag === undefined || images);
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) (paths[route.path] ??= {})[route.method] = operation(route, images);
  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    info: {
      title: "Decision service",
      version: "1",
      description:
        "Typed decisions over HTTP: real-time (`POST /v1/systemone`), models, key management and bulk batches. " +
        "Credentials go in `Authorization: Bearer <token>`: an API key for models, decisions and batches, a user access token for key management. " +
        (images
          ? "Image assets (`/v1/image-assets`) and the credit (`/v1/image-credit`) take the owner's API key where IMAGE_API is on and a signed-in user's access token where IMAGE_BROWSER is on; " +
            "image decisions go to `POST /v1/systemone` with an API key (IMAGE_API) or `POST /v1/image-decisions` from a signed-in session (IMAGE_BROWSER), and `GET /v1/image-models` is a session route. "
          : "The image routes exist only where an image flag is on (IMAGE_API, IMAGE_BROWSER); this deployment has both off. ") +
        `Every error is the one envelope \`{"error": {"code", "message", "status"}}\`. Request bodies hold at most ${LIMITS.decisionBodyBytes} bytes, nest at most ${LIMITS.jsonDepth} levels ` +
        "and are UTF-8 JSON with no duplicate key and no U+0000 in any string or key (such a body is refused, 422 `invalid_request`).",
    },
    servers: [{ url: "/", description: "This deployment" }],
    tags: [...new Set(routes.map((route) => route.tag))].map((name) => ({ name })),
    paths,
    webhooks: WEBHOOKS,
    components: {
      schemas: Object.fromEntries(Object.entries(COMPONENTS).map(([name, { schema, io }]) => [name, jsonSchemaOf(schema, io)])),
      headers: RESPONSE_HEADERS,
      securitySchemes: Object.fromEntries(Object.values(SECURITY).map(({ name, scheme }) => [name, scheme])),
    },
  };
}
