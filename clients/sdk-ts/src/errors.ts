/**
 * The errors the client throws. Every answer of the service that is not a success becomes an
 * `APIError`, of the subclass named after its status where the service uses that status, carrying
 * the envelope's `code` and `message` and the request id the service gave the response:
 *
 *     try {
 *       await client.systemOne({ state, questions });
 *     } catch (err) {
 *       if (err instanceof RateLimitError) console.log(err.retryAfterMs, err.requestId);
 *       else if (err instanceof APIError) console.log(err.status, err.code, err.message);
 *       else throw err;
 *     }
 *
 * A request that got no answer is an `APIConnectionError` (status undefined); when the client's own
 * timeout ended it, an `APIConnectionTimeoutError`. Neither proves that no work happened on the
 * service, which is why decisions are never retried after them.
 */
import { ErrorEnvelope } from "../../../contract/errors.ts";
import { IMAGE_REFUSALS, type ImageRefusal } from "../../../contract/images.ts";
import { REQUEST_ID_HEADER } from "../../../contract/limits.ts";

/**
 * A received webhook that `client.webhooks.verify` refuses: a header missing, a timestamp too far
 * from now, no signature of the secret over the body, a body that is not JSON. The contract's own
 * class, so the SDK and the service's signer agree on it.
 */
export { WebhookVerificationError } from "../../../contract/webhook-signature.ts";

export interface APIErrorInit {
  status?: number | undefined;
  code?: string | undefined;
  requestId?: string | null | undefined;
  headers?: Headers | undefined;
  body?: unknown;
  cause?: unknown;
}

/** Base class of every error of a request: an error answer of the service, or no answer at all. */
export class APIError extends Error {
  override name = "APIError";
  /** The HTTP status; undefined when no response came. */
  readonly status: number | undefined;
  /** The service's stable error code (`rate_limited`, `model_not_found`, ...); undefined when the body had none. */
  readonly code: string | undefined;
  /** The service's request id of the response (quote it when asking for help); null when there was none. */
  readonly requestId: string | null;
  /** The response headers; undefined when no response came. */
  readonly headers: Headers | undefined;
  /** The parsed error body (or its text when it was not JSON). */
  readonly body: unknown;

  constructor(message: string, init: APIErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId ?? null;
    this.headers = init.headers;
    this.body = init.body;
  }

  /**
   * How long the service asked the client to wait before trying again (`retry-after-ms`, else
   * `Retry-After` in seconds or as a date), in milliseconds; null when it did not say.
   */
  get retryAfterMs(): number | null {
    return retryAfterMs(this.headers);
  }

  /**
   * The error as one line for a person, as the svc tools print it:
   * `401 invalid_credentials: the API key is not valid (request req_...)`.
   */
  get summary(): string {
    const head = [this.status, this.code].filter((part) => part !== undefined).join(" ");
    const request = this.requestId ? ` (request ${this.requestId})` : "";
    return `${head ? `${head}: ` : ""}${this.message}${request}`;
  }

  /** The error for an answer with this status, body text and headers. */
  static fromResponse(status: number, headers: Headers, text: string): APIError {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's page, an empty body): the message below says so.
    }
    const envelope = ErrorEnvelope.safeParse(body);
    const code = envelope.success ? envelope.data.error.code : undefined;
    const message = envelope.success ? envelope.data.error.message : `the service answered ${status} without an error envelope${text ? `: ${text.slice(0, 200)}` : ""}`;
    const init = { status, code, requestId: headers.get(REQUEST_ID_HEADER), headers, body };
    const Class = status === 422 && isImageRefusal(code) ? ImageRefusedError : (STATUS_CLASSES[status] ?? APIError);
    return new Class(message, init);
  }
}

/**
 * 401: a missing, invalid, revoked (`revoked_key`) or expired (`expired_key`) API key, a disabled
 * account, or the wrong kind of credential (`wrong_credential_kind`).
 */
export class AuthenticationError extends APIError {
  override name = "AuthenticationError";
}
/**
 * 402: an image decision whose worst case is more than the account's prepaid credit
 * (`insufficient_credit`), refused before any GPU work: nothing was charged. Add credit and retry.
 *
 *     try {
 *       await client.imageDecisions.create({ model, state: "", questions, images: [{ asset_id }] });
 *     } catch (err) {
 *       if (err instanceof PaymentRequiredError) console.log((await client.imageCredit.retrieve()).balance_micro_usd);
 *     }
 */
export class PaymentRequiredError extends APIError {
  override name = "PaymentRequiredError";
}
/**
 * 403: the credential is valid but may not do this: a key created for less than this call
 * (`insufficient_scope`: a decisions-only key on a batch route, or a model it was not created for).
 *
 *     try {
 *       await limited.batches.create({ inputBytes: 100 });
 *     } catch (err) {
 *       if (err instanceof PermissionDeniedError && err.code === "insufficient_scope") console.log("use a key with batches in its scope");
 *     }
 */
export class PermissionDeniedError extends APIError {
  override name = "PermissionDeniedError";
}
/**
 * 404: an unknown model (or one this account may not use, or of the wrong kind: a text model for an
 * image decision), or an unknown batch, training or image asset (or another account's); an image
 * decision's asset that is not a ready asset of the account.
 */
export class NotFoundError extends APIError {
  override name = "NotFoundError";
}
/** 409: the job is not in a state that allows this (submit before upload, results before it finished), or a create repeats an idempotency key with another input size (`idempotency_conflict`). */
export class ConflictError extends APIError {
  override name = "ConflictError";
}
/** 410: a batch's results after their retention period. */
export class GoneError extends APIError {
  override name = "GoneError";
}
/**
 * 413: an image decision whose image needs more visual tokens than the serving runtime takes
 * (`context_too_large`), or a file sent to a signed storage address over its limit (`payload_too_large`).
 */
export class PayloadTooLargeError extends APIError {
  override name = "PayloadTooLargeError";
}
/**
 * 422: an invalid request body (a bad question, too few options, an empty state), or a question a
 * trained model was not trained on (`task_mismatch`).
 */
export class UnprocessableEntityError extends APIError {
  override name = "UnprocessableEntityError";
}
/**
 * 422 on an image asset's completion: the service refused the image (IMAGE_REFUSALS says what each
 * code means), before any GPU work. The asset stays rejected; a corrected file is a new asset.
 *
 *     try {
 *       await client.imageAssets.upload("cat.jpg");
 *     } catch (err) {
 *       if (err instanceof ImageRefusedError && err.code === "image_type_mismatch") console.log("rename it");
 *     }
 */
export class ImageRefusedError extends UnprocessableEntityError {
  override name = "ImageRefusedError";
  /** Why the image was refused. */
  declare readonly code: ImageRefusal;
}
/** 429: an account rate, token or batch limit; nothing ran, retried after `retryAfterMs`. */
export class RateLimitError extends APIError {
  override name = "RateLimitError";
}
/** 503: the model is not being served right now. Not retried for decisions: work may have started. */
export class ServiceUnavailableError extends APIError {
  override name = "ServiceUnavailableError";
}
/** 504: the decision waited 30 seconds for the GPU. Not retried: it may still run. */
export class GatewayTimeoutError extends APIError {
  override name = "GatewayTimeoutError";
}
/** 529: the service's execution lane is full; nothing ran, retried with backoff. */
export class OverloadedError extends APIError {
  override name = "OverloadedError";
}

/** No response: the connection failed or dropped. The request may or may not have been processed. */
export class APIConnectionError extends APIError {
  override name = "APIConnectionError";
  constructor(message = "the connection to the service failed", init: { cause?: unknown } = {}) {
    super(message, init);
  }
}

/** No response within the client's `timeout`. The request may still be processed by the service. */
export class APIConnectionTimeoutError extends APIConnectionError {
  override name = "APIConnectionTimeoutError";
  constructor(timeoutMs: number) {
    super(`no response from the service within ${timeoutMs} ms (the request may still be processed)`);
  }
}

/** The caller's `signal` aborted the request. */
export class APIUserAbortError extends APIError {
  override name = "APIUserAbortError";
  constructor(message = "the request was aborted", init: { cause?: unknown } = {}) {
    super(message, init);
  }
}

/** A client setting that cannot work (no API key, no base URL, plaintext HTTP to a remote host, a browser). */
export class ConfigurationError extends Error {
  override name = "ConfigurationError";
}

/** Input the client refuses before sending anything (a batch file over the limits, an unreadable file). */
export class InputError extends Error {
  override name = "InputError";
}

const STATUS_CLASSES: Record<number, typeof APIError | undefined> = {
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  410: GoneError,
  413: PayloadTooLargeError,
  422: UnprocessableEntityError,
  429: RateLimitError,
  503: ServiceUnavailableError,
  504: GatewayTimeoutError,
  529: OverloadedError,
};

function isImageRefusal(code: string | undefined): code is ImageRefusal {
  return code !== undefined && Object.hasOwn(IMAGE_REFUSALS, code);
}

/** The wait a response asks for, in milliseconds, or null. */
export function retryAfterMs(headers: Headers | undefined): number | null {
  const ms = headers?.get("retry-after-ms");
  if (ms && /^\d+(\.\d+)?$/.test(ms.trim())) return Number(ms);
  const after = headers?.get("retry-after")?.trim();
  if (!after) return null;
  if (/^\d+(\.\d+)?$/.test(after)) return Number(after) * 1000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}
