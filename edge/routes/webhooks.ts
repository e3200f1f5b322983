/**
 * Webhook endpoints with a user access token (runs in workerd); the wire shapes and the delivery
 * rules are contract/webhooks.ts, the outbox schema.sql's job_webhook_outbox, the sender
 * sidecar/webhooks.ts.
 *
 *   POST   /v1/webhooks {url, events, description?}   -> 201 endpoint + secret (shown at creation and rotation only)
 *   GET    /v1/webhooks                                -> {object: "list", data: [endpoint, ...]}, newest first
 *   GET    /v1/webhooks/{id}                           -> endpoint
 *   DELETE /v1/webhooks/{id}                           -> {id, object, deleted: true}
 *   POST   /v1/webhooks/{id}/rotate_secret {}          -> endpoint + its new secret
 *   GET    /v1/webhooks/{id}/deliveries?limit=&after=  -> one page of its delivery log, newest first
 *
 * Another account's endpoint answers 404, like one that does not exist. A secret is stored sealed
 * under WEBHOOK_SECRET_KEY (server-shared/webhook-secrets.ts): the database never holds one that signs.
 */
import { Hono, type Context } from "hono";
import { z } from "zod";
import { quoteName } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import { newWebhookSecret } from "../../contract/webhook-signature.ts";
import {
  checkWebhookUrl,
  CreateWebhookRequest,
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_LIMITS,
  type DeletedWebhookEndpoint,
  type WebhookDelivery,
  type WebhookDeliveryList,
  type WebhookEndpoint,
  type WebhookEndpointList,
  type WebhookEndpointWithSecret,
} from "../../contract/webhooks.ts";
import { readJson } from "../../server-shared/body.ts";
import { Column, httpDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { webhookKeyring } from "../../server-shared/webhook-secrets.ts";
import { userAccount } from "../accounts.ts";
import { userAuth } from "../auth/user.ts";
import type { AppEnv } from "../env.ts";
import { pathParam, queryParam } from "../params.ts";
import { services } from "../services.ts";

export const webhooks = new Hono<AppEnv>();
webhooks.use("/v1/webhooks", userAuth);
webhooks.use("/v1/webhooks/*", userAuth);

const COLUMNS = "id, url, events, description, created_at, secret_rotated_at";

const EndpointRow = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().nullable(),
  created_at: Column.time,
  secret_rotated_at: Column.time.nullable(),
});

const endpoint = (row: unknown): WebhookEndpoint => ({ object: "webhook_endpoint", ...EndpointRow.parse(row) });

webhooks.post("/v1/webhooks", async (c) => {
  const request = await readJson(c, CreateWebhookRequest, { maxBytes: LIMITS.controlBodyBytes });
  const checked = checkWebhookUrl(request.url, { privateTargets: services(c.env).settings.WEBHOOK_PRIVATE_TARGETS === "on" });
  if ("error" in checked) throw new ServiceError("invalid_request", checked.error);
  const accountId = await userAccount(c, { create: true });
  const id = crypto.randomUUID();
  const secret = newWebhookSecret();
  // Under the account's row lock, so that concurrent creates cannot both take the last place.
  const [, inserted = []] = await httpDb(services(c.env).sql).transaction([
    { text: "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", params: [accountId] },
    {
      text: `INSERT INTO webhook_endpoints (id, account_id, url, description, events, secret)
       SELECT $1, $2, $3, $4, $5, $6
        WHERE (SELECT count(*) FROM webhook_endpoints WHERE account_id = $2) < $7
       RETURNING ${COLUMNS}`,
      params: [id, accountId, checked.url.href, request.description ?? null, request.events, await sealed(c, id, secret), WEBHOOK_LIMITS.endpoints],
    },
  ]);
  if (!inserted[0]) throw new ServiceError("webhook_endpoint_limit", `this account already has ${WEBHOOK_LIMITS.endpoints} webhook endpoints, the most it may have; delete one first`);
  return c.json({ ...endpoint(inserted[0]), secret } satisfies WebhookEndpointWithSecret, 201);
});

webhooks.get("/v1/webhooks", async (c) => {
  const accountId = await userAccount(c, { create: false });
  const rows = accountId ? await services(c.env).sql.query(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE account_id = $1 ORDER BY created_at DESC, id`, [accountId]) : [];
  return c.json({ object: "list", data: rows.map(endpoint) } satisfies WebhookEndpointList);
});

webhooks.get("/v1/webhooks/:id", async (c) => c.json(endpoint(await ownEndpoint(c))));

webhooks.delete("/v1/webhooks/:id", async (c) => {
  const { id } = await ownEndpoint(c);
  await services(c.env).sql.query("DELETE FROM webhook_endpoints WHERE id = $1", [id]);
  return c.json({ id, object: "webhook_endpoint", deleted: true } satisfies DeletedWebhookEndpoint);
});

webhooks.post("/v1/webhooks/:id/rotate_secret", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const { id } = await ownEndpoint(c);
  const secret = newWebhookSecret();
  const [row] = await services(c.env).sql.query(
    `UPDATE webhook_endpoints
        SET previous_secret = secret, previous_secret_until = now() + make_interval(secs => $3::double precision / 1000),
            secret = $2, secret_rotated_at = now()
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, await sealed(c, id, secret), WEBHOOK_LIMITS.previousSecretMs],
  );
  if (!row) throw notFound(c);
  return c.json({ ...endpoint(row), secret } satisfies WebhookEndpointWithSecret);
});

const DeliveryRow = z.object({
  id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  job_id: z.string(),
  status: z.enum(WEBHOOK_DELIVERY_STATUSES),
  attempts: Column.int,
  created_at: Column.time,
  last_attempt_at: Column.time.nullable(),
  last_status_code: Column.int.nullable(),
  last_error: z.string().nullable(),
  next_attempt_at: Column.time,
  finished_at: Column.time.nullable(),
});

webhooks.get("/v1/webhooks/:id/deliveries", async (c) => {
  const limit = queryParam(c, PARAMETERS.deliveryListLimit);
  const after = queryParam(c, PARAMETERS.deliveryListAfter);
  const { id } = await ownEndpoint(c);
  const rows = await services(c.env).sql.query(
    `SELECT id, event_id, event_type, job_id, status, attempts, created_at, last_attempt_at, last_status_code, last_error, next_attempt_at, finished_at
       FROM webhook_deliveries
      WHERE endpoint_id = $1
        AND ($2::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM webhook_deliveries WHERE id = $2::uuid AND endpoint_id = $1))
      ORDER BY created_at DESC, id DESC
      LIMIT $3`,
    [id, after ?? null, limit + 1],
  );
  const data = rows.slice(0, limit).map((raw): WebhookDelivery => {
    const row = DeliveryRow.parse(raw);
    return { object: "webhook_delivery", ...row, next_attempt_at: row.status === "pending" ? row.next_attempt_at : null };
  });
  return c.json({ object: "list", data, has_more: rows.length > limit } satisfies WebhookDeliveryList);
});

/** `secret` as the endpoint `id` stores it: sealed under the first key of WEBHOOK_SECRET_KEY. */
async function sealed(c: Context<AppEnv>, id: string, secret: string): Promise<string> {
  return (await webhookKeyring(services(c.env).settings.WEBHOOK_SECRET_KEY)).seal(id, secret);
}

/** The signed-in user's endpoint named by the path; 404 for a malformed id, an unknown one and another account's alike. */
async function ownEndpoint(c: Context<AppEnv>): Promise<z.infer<typeof EndpointRow>> {
  const id = pathParam(c, PARAMETERS.webhookId);
  const accountId = await userAccount(c, { create: false });
  const [row] = id !== null && accountId ? await services(c.env).sql.query(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = $1 AND account_id = $2`, [id, accountId]) : [];
  if (!row) throw notFound(c);
  return EndpointRow.parse(row);
}

const notFound = (c: Context<AppEnv>) => new ServiceError("not_found", `no webhook endpoint ${quoteName(c.req.param("id") ?? "")} in this account`);
