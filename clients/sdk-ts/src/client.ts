/**
 * The client: its settings, and the resources that share its transport.
 *
 *     import { Client, noul } from "@decision-service/sdk";
 *     const client = new Client({ apiKey: process.env.SVC_API_KEY, baseURL: "https://decisions.example.com" });
 *     const reply = await client.systemOne({ state: "I was charged twice", questions: { refund: noul("Refund?") } });
 *
 * Each setting comes from the constructor's option, else its environment variable (`SVC_API_KEY`,
 * `SVC_ACCESS_TOKEN`, `SVC_BASE_URL`, `SVC_DEFAULT_MODEL`, `SVC_WEBHOOK_SECRET`), else its default.
 * The command-line tool's saved credentials are never read: a program says which credentials it
 * uses. The service publishes no default address, so a base URL is required. It must be https, or
 * http to a loopback host; redirects are never followed.
 *
 * Two credentials, as the service has two: the account's API key for decisions, models and batches,
 * and the signed-in user's access token for training (`client.trainings`, `client.models.retire`), the
 * account's API keys (`client.keys`), its usage (`client.usage`), its webhook endpoints
 * (`client.webhooks`) and a session's image models and decisions (`client.imageModels`,
 * `client.imageDecisions`), which the service refuses an API key for. Image assets and the image credit (`client.imageAssets`,
 * `client.imageCredit`) take either: the API key when the client has one. A client needs at least
 * one; a call whose credential the client lacks throws ConfigurationError before anything is sent.
 */
import { LIMITS, SHARED_ALIAS } from "../../../contract/limits.ts";
import { stringifyJson } from "../../../contract/json.ts";
import { normalizeBaseUrl } from "./base-url.ts";
import { Transport, withRequestId, type Fetch, type RequestOptions, type WithRequestId } from "./core.ts";
import type { DecisionRequest, DecisionResponse, Questions } from "./decisions.ts";
import { ConfigurationError } from "./errors.ts";
import { Batches } from "./resources/batches.ts";
import { ImageAssets } from "./resources/image-assets.ts";
import { ImageCredit } from "./resources/image-credit.ts";
import { ImageDecisions } from "./resources/image-decisions.ts";
import { ImageModels } from "./resources/image-models.ts";
import { Keys } from "./resources/keys.ts";
import { Models } from "./resources/models.ts";
import { Trainings } from "./resources/trainings.ts";
import { UsageReports } from "./resources/usage.ts";
import { Webhooks } from "./resources/webhooks.ts";
import { Semaphore } from "./semaphore.ts";

export interface ClientOptions {
  /** The account's API key (decisions, models, batches); `SVC_API_KEY` when absent. */
  apiKey?: string | undefined;
  /**
   * The signed-in user's access token of the identity provider, which training, usage and a session's
   * image routes take instead of an API key (`trainings`, `models.retire`, `keys`, `usage`,
   * `webhooks`, `imageModels`, `imageDecisions`); `SVC_ACCESS_TOKEN` when absent.
   */
  accessToken?: string | undefined;
  /** The signing secret (whsec_...) `webhooks.verify` checks deliveries with when it is given none; `SVC_WEBHOOK_SECRET` when absent. */
  webhookSecret?: string | undefined;
  /** The service's address, without `/v1/...`; `SVC_BASE_URL` when absent. */
  baseURL?: string | undefined;
  /** The model of requests that name none; `SVC_DEFAULT_MODEL`, else `svc-shared`. */
  defaultModel?: string | undefined;
  /** Milliseconds one request may take, answer included (default 60 000). */
  timeout?: number | undefined;
  /** Retries after 429 and 529, the answers given before any work (default 2). */
  maxRetries?: number | undefined;
  /** The fetch to use (the global one by default). */
  fetch?: Fetch | undefined;
}

export const DEFAULT_TIMEOUT_MS = LIMITS.toolRequestTimeoutMs;
export const DEFAULT_MAX_RETRIES = 2;

export class Client {
  /** The service's address, without a trailing slash. */
  readonly baseURL: string;
  readonly defaultModel: string;
  readonly timeout: number;
  readonly maxRetries: number;
  readonly models: Models;
  readonly batches: Batches;
  readonly trainings: Trainings;
  readonly imageAssets: ImageAssets;
  readonly imageDecisions: ImageDecisions;
  readonly imageModels: ImageModels;
  readonly imageCredit: ImageCredit;
  readonly usage: UsageReports;
  /** The account's API keys: create (limited in time, scope and models), list, revoke; with the access token. */
  readonly keys: Keys;
  /** The account's webhook endpoints and their deliveries, with the access token; `verify` for a receiver. */
  readonly webhooks: Webhooks;
  private readonly transport: Transport;

  /**
   * Checks the settings and makes the client; nothing is sent until the first call.
   *
   *     const client = new Client();   // SVC_API_KEY and SVC_BASE_URL from the environment
   *     const local = new Client({ apiKey: "svc_...", baseURL: "http://127.0.0.1:8787", timeout: 10_000 });
   *     const trainer = new Client({ accessToken: session.access_token, baseURL: "https://decisions.example.com" });
   */
  constructor(options: ClientOptions = {}) {
    if (inBrowser()) {
      throw new ConfigurationError("this client does not run in a browser: an API key in a web page is readable by everyone who loads it; call the service from a server");
    }
    const apiKey = nonEmpty(options.apiKey) ?? env("SVC_API_KEY");
    const accessToken = nonEmpty(options.accessToken) ?? env("SVC_ACCESS_TOKEN");
    if (apiKey === undefined && accessToken === undefined) {
      throw new ConfigurationError("no API key: pass { apiKey } to new Client() or set SVC_API_KEY (a client that only trains takes { accessToken } or SVC_ACCESS_TOKEN instead)");
    }
    const baseURL = options.baseURL ?? env("SVC_BASE_URL");
    if (!baseURL) {
      throw new ConfigurationError("no base URL: pass { baseURL } to new Client() or set SVC_BASE_URL to the service's address (this service has no default address)");
    }
    this.baseURL = normalizeBaseUrl(baseURL, "base");
    this.defaultModel = options.defaultModel ?? env("SVC_DEFAULT_MODEL") ?? SHARED_ALIAS;
    this.timeout = options.timeout ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(this.timeout) || this.timeout <= 0) throw new ConfigurationError("timeout is a positive number of milliseconds");
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0) throw new ConfigurationError("maxRetries is a non-negative integer");
    const fetchFn: Fetch | undefined = options.fetch ?? globalThis.fetch;
    if (typeof fetchFn !== "function") throw new ConfigurationError("no fetch: this client needs Node 20 or later, or a fetch option");
    this.transport = new Transport({
      apiKey,
      accessToken,
      baseURL: this.baseURL,
      timeout: this.timeout,
      maxRetries: this.maxRetries,
      fetch: fetchFn,
      semaphore: new Semaphore(LIMITS.httpConnectionsPerService),
    });
    this.models = new Models(this.transport);
    this.batches = new Batches(this.transport, () => this.defaultModel);
    this.trainings = new Trainings(this.transport, () => this.defaultModel);
    this.imageAssets = new ImageAssets(this.transport);
    this.imageDecisions = new ImageDecisions(this.transport, () => this.defaultModel);
    this.imageModels = new ImageModels(this.transport);
    this.imageCredit = new ImageCredit(this.transport);
    this.usage = new UsageReports(this.transport);
    this.keys = new Keys(this.transport);
    this.webhooks = new Webhooks(this.transport, nonEmpty(options.webhookSecret) ?? env("SVC_WEBHOOK_SECRET"));
  }

  /**
   * One real-time decision: typed answers to every question about `state`, and token usage. The
   * model is `request.model`, else the client's `defaultModel`. Retried only after 429 and 529; a
   * 503, 504, timeout or dropped connection is thrown, since the decision may have run.
   *
   *     const reply = await client.systemOne({
   *       state: { ticket: "My card was charged twice for one order" },
   *       questions: {
   *         refund: noul("Does the customer want money back?"),
   *         topic: choice(["billing", "shipping", "bug"]),
   *         severity: score(["low", "medium", "high"]),
   *       },
   *     });
   *     reply.answers.refund.noul;        // 0.93
   *     reply.answers.topic.choice;       // "billing"
   *     reply.answers.severity.score;     // 1.4
   *
   * With `images: [{ asset_id }]` (where the service has IMAGE_API on) it is an image decision: a
   * trained image model, its one `choice` question, an answer with `unknown_probability`, paid from
   * the account's prepaid credit (PaymentRequiredError when it cannot cover it); see `imageDecisions`.
   */
  async systemOne<const Q extends Questions>(request: DecisionRequest<Q>, options?: RequestOptions): Promise<WithRequestId<DecisionResponse<Q>>> {
    // Written with stringifyJson so a Map (an order JavaScript objects cannot keep) is sent in its order.
    const body = stringifyJson({ ...request, model: request.model ?? this.defaultModel });
    return withRequestId(await this.transport.request<DecisionResponse<Q>>({ method: "POST", path: "/v1/systemone", body }, options));
  }
}

function inBrowser(): boolean {
  const scope = globalThis as { window?: unknown; document?: unknown };
  return typeof scope.window !== "undefined" && typeof scope.document !== "undefined";
}

const nonEmpty = (value: string | undefined) => (value === "" ? undefined : value);

/** An environment variable, undefined when unset or empty. */
function env(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value === "" ? undefined : value;
}
