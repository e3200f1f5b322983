/**
 * The one path every request takes: a permit of the client's semaphore, the timeout, the request
 * with redirects refused, the answer read to its end, errors by status, and retries.
 *
 * Retries happen only after 429 (an account limit) and 529 (the execution lane is full): the service
 * answers both before any work starts, so a retry cannot compute anything twice. The wait is what
 * the service asks for (`retry-after-ms`, else `Retry-After`), or exponential backoff with jitter
 * when it says nothing. Everything else (503, 504, a timeout, a dropped connection) is thrown at
 * once: a decision may have run, and only the caller can tell whether running it again is right. A
 * call that repeating cannot make do anything twice may name more answers to retry (`retryAlso`).
 */
import { REQUEST_ID_HEADER } from "../../../contract/limits.ts";
import { checkServiceUrl } from "../../../contract/urls.ts";
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, ConfigurationError } from "./errors.ts";
import type { Semaphore } from "./semaphore.ts";
import { VERSION } from "./version.ts";

/** Per-request settings; each overrides the client's for this call only. */
export interface RequestOptions {
  /** Milliseconds one attempt may take, answer included. */
  timeout?: number;
  /** Retries after 429 and 529. */
  maxRetries?: number;
  /** Aborts the request (and any wait before a retry). */
  signal?: AbortSignal;
}

/** The fetch the client sends with: the global one, or any function of the same shape. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * Which credential a call sends: the account's API key (decisions, models, batches), or the signed-in
 * user's access token (training, a session's image models and decisions, which the service refuses
 * an API key for). A route that takes either (image assets, the image credit) names both, in the
 * order of preference.
 */
export type Credential = "api_key" | "access_token";

/** What a call without its credential throws, before anything is sent. */
const MISSING_CREDENTIAL: Record<Credential, string> = {
  api_key: "no API key: this call takes the account's API key; pass { apiKey } to new Client() or set SVC_API_KEY",
  access_token:
    "no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token, not an API key; pass { accessToken } to new Client() or set SVC_ACCESS_TOKEN (`svc login` saves one, which @decision-service/sdk/settings resolveSession reads)",
};

export interface TransportSettings {
  apiKey: string | undefined;
  accessToken: string | undefined;
  /** The service's address without a trailing slash, e.g. `https://decisions.example.com`. */
  baseURL: string;
  timeout: number;
  maxRetries: number;
  fetch: Fetch;
  semaphore: Semaphore;
}

export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** A path under the base URL (`/v1/models`), sent with the credential `auth` names. */
  path?: string;
  /** The credential of a `path` call, or several: the first of them the client has (the API key when absent). */
  auth?: Credential | readonly Credential[];
  /** An absolute URL given by the service (a signed upload): sent without any credential. */
  url?: string;
  query?: Record<string, string | number | undefined>;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  /**
   * Errors besides 429 and 529 that this call is retried after, with the same waits and count: only
   * for a call that repeating cannot make do anything twice (an image asset's completion).
   */
  retryAlso?: (err: APIError) => boolean;
}

export interface Reply<T> {
  data: T;
  status: number;
  headers: Headers;
  requestId: string | null;
}

/** A Retry-After longer than this is not waited out; the caller gets the 429 or 529. */
export const MAX_RETRY_WAIT_MS = 60_000;
const BACKOFF_INITIAL_MS = 500;
const BACKOFF_MAX_MS = 8_000;
const RETRIED_STATUSES = new Set([429, 529]);

export class Transport {
  // A true private field: the credentials stay out of util.inspect, console.log and JSON of the client.
  readonly #settings: TransportSettings;

  constructor(settings: TransportSettings) {
    this.#settings = settings;
  }

  /**
   * The client's `credential`, or the first of several it has; throws ConfigurationError when it has
   * none of them: called before any work that would be wasted without it.
   */
  require(credential: Credential | readonly Credential[]): string {
    const kinds: readonly Credential[] = typeof credential === "string" ? [credential] : credential;
    for (const kind of kinds) {
      const value = kind === "api_key" ? this.#settings.apiKey : this.#settings.accessToken;
      if (value !== undefined) return value;
    }
    throw new ConfigurationError(MISSING_CREDENTIAL[kinds[0] ?? "api_key"]);
  }

  /** Sends `call`, retrying after 429 and 529 (and what `call.retryAlso` names) only; returns the parsed JSON answer. */
  async request<T>(call: Call, options: RequestOptions = {}): Promise<Reply<T>> {
    const maxRetries = options.maxRetries ?? this.#settings.maxRetries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(call, options);
      } catch (err) {
        const retried = err instanceof APIError && (RETRIED_STATUSES.has(err.status ?? 0) || call.retryAlso?.(err) === true);
        const wait = retried && attempt < maxRetries ? retryWait(err, attempt) : null;
        if (wait === null) throw err;
        await sleep(wait, options.signal);
      }
    }
  }

  /** One attempt, holding a permit from sending until the answer is read. */
  private async once<T>(call: Call, options: RequestOptions): Promise<Reply<T>> {
    const { url, headers } = this.prepare(call);
    const release = await this.#settings.semaphore.acquire(options.signal).catch((reason: unknown) => {
      throw new APIUserAbortError(undefined, { cause: reason });
    });
    const timeoutMs = options.timeout ?? this.#settings.timeout;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = () => controller.abort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) controller.abort();
    try {
      const res = await this.#settings.fetch(url, { method: call.method, headers, body: call.body, redirect: "manual", signal: controller.signal });
      const text = await res.text();
      if (res.status >= 300 && res.status < 400) throw redirectError(res, call);
      if (!res.ok) throw APIError.fromResponse(res.status, res.headers, text);
      return { data: parseBody<T>(text, res), status: res.status, headers: res.headers, requestId: res.headers.get(REQUEST_ID_HEADER) };
    } catch (err) {
      if (err instanceof APIError) throw err;
      if (timedOut) throw new APIConnectionTimeoutError(timeoutMs);
      if (options.signal?.aborted) throw new APIUserAbortError(undefined, { cause: options.signal.reason });
      throw new APIConnectionError(`the connection to the service failed: ${describe(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      // fetch hands the connection back to its pool a tick after the body ends; a permit released
      // sooner lets the next request open a 33rd connection instead of reusing this one.
      await new Promise((resolve) => setImmediate(resolve));
      release();
    }
  }

  private prepare(call: Call): { url: string; headers: Record<string, string> } {
    const headers: Record<string, string> = { "user-agent": `decision-service-sdk-ts/${VERSION}`, ...call.headers };
    let url: URL;
    if (call.url !== undefined) {
      // A signed destination carries its own credential; neither the key nor the token goes to storage.
      try {
        url = checkServiceUrl(call.url, "upload");
      } catch (err) {
        throw new APIError(`the service gave an unusable upload address: ${describe(err)}`);
      }
    } else {
      url = new URL(`${this.#settings.baseURL}${call.path ?? ""}`);
      headers.authorization = `Bearer ${this.require(call.auth ?? "api_key")}`;
      headers.accept = "application/json";
    }
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    if (typeof call.body === "string") headers["content-type"] ??= "application/json";
    return { url: url.toString(), headers };
  }
}

/** The wait before retry number `attempt + 1`, or null when the service asked for more than MAX_RETRY_WAIT_MS. */
export function retryWait(err: APIError, attempt: number): number | null {
  const asked = err.retryAfterMs;
  if (asked !== null) return asked <= MAX_RETRY_WAIT_MS ? asked : null;
  const backoff = Math.min(BACKOFF_INITIAL_MS * 2 ** attempt, BACKOFF_MAX_MS);
  return backoff * (0.75 + Math.random() * 0.25);
}

function parseBody<T>(text: string, res: Response): T {
  if (text === "") return null as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new APIError(`the service answered ${res.status} with a body that is not JSON`, {
      status: res.status,
      headers: res.headers,
      requestId: res.headers.get(REQUEST_ID_HEADER),
      body: text,
    });
  }
}

function redirectError(res: Response, call: Call): APIError {
  // A signed upload URL is a credential: neither it nor where it was sent is repeated in a message.
  const where = call.url === undefined ? ` to ${res.headers.get("location") ?? "an unnamed location"}` : "";
  return new APIError(`the service answered a redirect (${res.status})${where}; redirects are not followed: set the base URL to the service's own address`, {
    status: res.status,
    headers: res.headers,
    requestId: res.headers.get(REQUEST_ID_HEADER),
  });
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return `${err.message}${cause}`;
}

/** Waits `ms`, or rejects with APIUserAbortError when `signal` aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new APIUserAbortError(undefined, { cause: signal.reason }));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new APIUserAbortError(undefined, { cause: signal?.reason }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** What a method returns: the answer's JSON, with the request id as `_request_id` (not enumerable, so not serialized). */
export type WithRequestId<T> = T & { readonly _request_id?: string | null };

export function withRequestId<T>(reply: Reply<T>): WithRequestId<T> {
  const data = reply.data;
  if (data !== null && typeof data === "object") {
    Object.defineProperty(data, "_request_id", { value: reply.requestId, enumerable: false });
  }
  return data as WithRequestId<T>;
}
