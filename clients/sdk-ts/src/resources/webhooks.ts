/**
 * `client.webhooks`: the account's webhook endpoints (POST and GET /v1/webhooks, GET and DELETE
 * /v1/webhooks/{id}, POST /v1/webhooks/{id}/rotate_secret, GET /v1/webhooks/{id}/deliveries), and
 * `verify`, which checks a delivery a receiver got. Managing endpoints takes the signed-in user's
 * access token (the client's `accessToken`), never an API key, as key management does; `verify`
 * sends nothing.
 *
 *     const session = new Client({ accessToken, baseURL });
 *     const endpoint = await session.webhooks.create({ url: "https://example.com/hooks", events: ["batch.completed"] });
 *     endpoint.secret;                   // whsec_...: shown at creation and rotation only
 *     for await (const delivery of session.webhooks.deliveries.list(endpoint.id)) console.log(delivery.event_type, delivery.status);
 *
 *     // In the receiver, with the body exactly as it arrived (before any JSON parsing):
 *     const event = await client.webhooks.verify(rawBody, req.headers);   // the client's webhookSecret, or SVC_WEBHOOK_SECRET
 *
 * The service checks what `create` sends (an UnprocessableEntityError, 422, names what is wrong);
 * the client sends it as given.
 */
import { verifyWebhook } from "../../../../contract/webhook-signature.ts";
import type {
  DeletedWebhookEndpoint,
  WEBHOOK_EVENTS,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpointList,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from "../../../../contract/webhooks.ts";
import { withRequestId, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";
import { ConfigurationError } from "../errors.ts";
import { PagePromise } from "./pages.ts";

/** An event an endpoint may subscribe to (WEBHOOK_EVENTS): `batch.completed`, `training.ready`, ... */
export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

export interface CreateWebhookParams {
  /** Where deliveries are POSTed: HTTPS to a public host (at most WEBHOOK_LIMITS.urlChars characters). */
  url: string;
  /** The events to send it, at least one, none twice. */
  events: readonly WebhookEventName[];
  /** Your note on the endpoint (at most WEBHOOK_LIMITS.descriptionChars characters). */
  description?: string | undefined;
}

export interface ListDeliveriesParams {
  /** Deliveries per page, 1 to WEBHOOK_LIMITS.page.max (the service's WEBHOOK_LIMITS.page.default when absent). */
  limit?: number;
  /** The last delivery id of the previous page. */
  after?: string;
}

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, in seconds (WEBHOOK_TOLERANCE_SECONDS when absent). */
  toleranceSeconds?: number;
  /** The receiver's clock (now when absent). */
  now?: Date;
}

/** The headers of a received delivery: a fetch `Headers`, or Node's `req.headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** `client.webhooks.deliveries`: an endpoint's delivery log. */
export class WebhookDeliveries {
  constructor(private readonly transport: Transport) {}

  /**
   * The endpoint's deliveries, newest first: each event, its attempts and the last outcome. Awaited,
   * one page (`{ data, has_more }`); iterated, every delivery of every page.
   *
   *     const page = await session.webhooks.deliveries.list(endpoint.id, { limit: 10 });
   *     for await (const d of session.webhooks.deliveries.list(endpoint.id)) console.log(d.job_id, d.status, d.last_error);
   */
  list(id: string, params: ListDeliveriesParams = {}, options?: RequestOptions): PagePromise<WebhookDelivery, WebhookDeliveryList> {
    const path = `/v1/webhooks/${encodeURIComponent(id)}/deliveries`;
    const fetchPage = async (after: string | undefined) =>
      withRequestId(await this.transport.request<WebhookDeliveryList>({ method: "GET", path, auth: "access_token", query: { limit: params.limit, after } }, options));
    // The page has no next_cursor: the next one starts after its last delivery.
    return new PagePromise(fetchPage, params.after, (page) => page.data.at(-1)?.id ?? null);
  }
}

export class Webhooks {
  readonly deliveries: WebhookDeliveries;
  // A true private field: the secret stays out of util.inspect, console.log and JSON of the client.
  readonly #secret: string | undefined;

  constructor(
    private readonly transport: Transport,
    secret: string | undefined,
  ) {
    this.deliveries = new WebhookDeliveries(transport);
    this.#secret = secret;
  }

  /**
   * Registers an endpoint for `events` (at most WEBHOOK_LIMITS.endpoints an account: one more is a
   * ConflictError, 409 `webhook_endpoint_limit`); the answer carries its signing `secret`, shown
   * now and at a rotation only.
   *
   *     const endpoint = await session.webhooks.create({ url: "https://example.com/hooks", events: ["batch.completed", "training.ready"], description: "orders" });
   */
  async create(params: CreateWebhookParams, options?: RequestOptions): Promise<WithRequestId<WebhookEndpointWithSecret>> {
    const { url, events, description } = params;
    const body = JSON.stringify({ url, events, description });
    return withRequestId(await this.transport.request<WebhookEndpointWithSecret>({ method: "POST", path: "/v1/webhooks", auth: "access_token", body }, options));
  }

  /**
   * Every endpoint of the account, newest first; never a secret.
   *
   *     const { data } = await session.webhooks.list();
   *     for (const endpoint of data) console.log(endpoint.id, endpoint.url, endpoint.events.join(","));
   */
  async list(options?: RequestOptions): Promise<WithRequestId<WebhookEndpointList>> {
    return withRequestId(await this.transport.request<WebhookEndpointList>({ method: "GET", path: "/v1/webhooks", auth: "access_token" }, options));
  }

  /** One endpoint; another account's or an unknown one is a NotFoundError. */
  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<WebhookEndpoint>> {
    return withRequestId(await this.transport.request<WebhookEndpoint>({ method: "GET", path: endpointPath(id), auth: "access_token" }, options));
  }

  /** Deletes an endpoint, and its deliveries not yet made with it. */
  async delete(id: string, options?: RequestOptions): Promise<WithRequestId<DeletedWebhookEndpoint>> {
    return withRequestId(await this.transport.request<DeletedWebhookEndpoint>({ method: "DELETE", path: endpointPath(id), auth: "access_token" }, options));
  }

  /**
   * Gives an endpoint a new signing secret, returned with it; for WEBHOOK_LIMITS.previousSecretMs
   * (a day) deliveries are signed with the previous one too, so a receiver can switch without a gap.
   *
   *     const { secret } = await session.webhooks.rotateSecret(endpoint.id);
   */
  async rotateSecret(id: string, options?: RequestOptions): Promise<WithRequestId<WebhookEndpointWithSecret>> {
    const path = `${endpointPath(id)}/rotate_secret`;
    return withRequestId(await this.transport.request<WebhookEndpointWithSecret>({ method: "POST", path, auth: "access_token", body: "{}" }, options));
  }

  /**
   * Checks a received delivery and returns its event: the `webhook-id`, `webhook-timestamp` and
   * `webhook-signature` headers are there, the timestamp is within `toleranceSeconds` of now (an old
   * delivery replayed fails), and a signature is `secret`'s over exactly `payload`, the raw body
   * text. Throws WebhookVerificationError when not. `secret` is the client's `webhookSecret` (or
   * SVC_WEBHOOK_SECRET) when absent; with neither, ConfigurationError.
   *
   *     app.post("/hooks", express.text({ type: "application/json" }), async (req, res) => {
   *       const event = await client.webhooks.verify(req.body, req.headers);
   *       if (event.type === "batch.completed") await collect(event.data.id);
   *       res.sendStatus(204);
   *     });
   */
  async verify(payload: string, headers: WebhookHeaders, secret?: string, opts: VerifyOptions = {}): Promise<WebhookEvent> {
    const key = secret || this.#secret;
    if (key === undefined || key === "") {
      throw new ConfigurationError("no webhook secret: pass the endpoint's secret (whsec_...) to webhooks.verify(), or { webhookSecret } to new Client(), or set SVC_WEBHOOK_SECRET");
    }
    return (await verifyWebhook(payload, headers, key, opts)) as WebhookEvent;
  }
}

const endpointPath = (id: string) => `/v1/webhooks/${encodeURIComponent(id)}`;
