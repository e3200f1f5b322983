/**
 * `svc webhooks ...` (runs in a user's terminal): the account's webhook endpoints, told when its
 * batches and trainings end. Like `svc keys`, it takes the signed-in user's access token (the
 * browser sign-in `svc login` saved, or SVC_ACCESS_TOKEN), never an API key.
 *
 *     svc webhooks create --url https://example.com/hooks --events batch.completed,training.ready   prints the secret, once
 *     svc webhooks list | get ID | delete ID
 *     svc webhooks rotate-secret ID                                                                prints the new secret, once
 *     svc webhooks deliveries ID [--limit N] [--after ID]                                          the delivery log, newest first
 *
 * A signing secret is the only thing `create` and `rotate-secret` print on standard output (so
 * `svc webhooks create ... > hook.secret` keeps it and nothing else); the rest goes to standard error.
 */
import type { Command, Group, Parsed } from "../command.ts";
import type { Context } from "../context.ts";
import { UsageError } from "../errors.ts";
import { formatRows } from "../jobs.ts";
import { renderDeliveries, renderWebhooks } from "../render.ts";
import { WEBHOOK_EVENTS, WEBHOOK_LIMITS, type WebhookEndpointWithSecret, type WebhookEventName } from "../sdk.ts";

const EVENTS = WEBHOOK_EVENTS.join(", ");

/** --events as the event names to send: comma-separated, each one of WEBHOOK_EVENTS, none twice. */
export function eventsOf(values: Parsed["values"]): WebhookEventName[] {
  const text = values.events as string | undefined;
  if (text === undefined) throw new UsageError(`--events is required: one or more of ${EVENTS}, separated by commas`);
  const events = text.split(",").map((event) => event.trim());
  for (const event of events) {
    if (!(WEBHOOK_EVENTS as readonly string[]).includes(event)) {
      throw new UsageError(`--events takes event names separated by commas; ${event === "" ? "an empty name" : JSON.stringify(event.slice(0, 40))} is not one of ${EVENTS}`);
    }
  }
  if (new Set(events).size !== events.length) throw new UsageError("--events names an event twice");
  return events as WebhookEventName[];
}

/** A new signing secret on standard output (or the endpoint as JSON), and what to do with it on standard error. */
function printSecret(ctx: Context, json: boolean, endpoint: WebhookEndpointWithSecret, done: string): void {
  ctx.stdout.write(json ? `${JSON.stringify(endpoint)}\n` : `${endpoint.secret}\n`);
  ctx.status(done);
  if (!json) ctx.status("The signing secret above is shown only now: keep it where your receiver reads it (`svc webhooks rotate-secret ID` makes a new one).");
}

const create: Command = {
  name: "create",
  summary: "Register an endpoint for job events; prints its signing secret, shown only now",
  usage: "svc webhooks create --url URL --events EVENT[,EVENT...] [--description TEXT] [--json]",
  description: [
    "Prints the endpoint's signing secret (whsec_...) on standard output, the only time it is shown",
    "(`svc webhooks rotate-secret ID` makes a new one); the endpoint's id goes to standard error. Each",
    "delivery is a POST of the event as JSON, signed in the Standard Webhooks format with that secret.",
    "",
    "--events: one or more of these, separated by commas:",
    `  ${WEBHOOK_EVENTS.filter((event) => event.startsWith("batch.")).join(", ")}`,
    `  ${WEBHOOK_EVENTS.filter((event) => event.startsWith("training.")).join(", ")}`,
    `--url is an https:// address of a public host. An account has at most ${WEBHOOK_LIMITS.endpoints} endpoints (one more`,
    "is refused: 409 webhook_endpoint_limit).",
    "",
    "Takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN), not an API key.",
  ].join("\n"),
  options: {
    url: { type: "string", value: "URL", help: "where deliveries are POSTed (https://, a public host)" },
    events: { type: "string", value: "EVENTS", help: "the events to send, separated by commas (batch.completed,training.ready)" },
    description: { type: "string", value: "TEXT", help: `your note on the endpoint (at most ${WEBHOOK_LIMITS.descriptionChars} characters)` },
    json: { type: "boolean", help: "print the created endpoint as JSON (its secret included)" },
  },
  async run(ctx, { values }) {
    const url = values.url as string | undefined;
    if (url === undefined) throw new UsageError("--url is required: the https:// address deliveries are POSTed to");
    const params = { url, events: eventsOf(values), description: values.description as string | undefined };
    const endpoint = await ctx.webhooksClient().webhooks.create(params, { signal: ctx.signal });
    printSecret(ctx, values.json === true, endpoint, `Created webhook endpoint ${endpoint.id}: ${endpoint.events.join(", ")} to ${endpoint.url}.`);
  },
};

const list: Command = {
  name: "list",
  summary: "List the account's webhook endpoints, newest first: id, events, description, URL",
  usage: "svc webhooks list [--json]",
  description: "Never shows a secret.",
  options: { json: { type: "boolean", help: "print the response JSON" } },
  async run(ctx, { values }) {
    const endpoints = await ctx.webhooksClient().webhooks.list({ signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(endpoints)}\n` : renderWebhooks(endpoints.data));
  },
};

const get: Command = {
  name: "get",
  summary: "Show a webhook endpoint",
  usage: "svc webhooks get ID [--json]",
  description: "ID is the endpoint's id, as `svc webhooks list` shows it; never shows its secret. Another account's endpoint is not found (exit 1).",
  options: { json: { type: "boolean", help: "print the endpoint as JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const endpoint = await ctx.webhooksClient().webhooks.retrieve(positionals[0]!, { signal: ctx.signal });
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify(endpoint)}\n`);
      return;
    }
    const rows = formatRows([
      ["id", endpoint.id],
      ["url", endpoint.url],
      ["events", endpoint.events.join(", ")],
      ["description", endpoint.description],
      ["created", endpoint.created_at],
      ["secret rotated", endpoint.secret_rotated_at],
    ]);
    ctx.stdout.write(`${rows.join("\n")}\n`);
  },
};

const remove: Command = {
  name: "delete",
  summary: "Delete a webhook endpoint; its deliveries not yet made are dropped",
  usage: "svc webhooks delete ID [--json]",
  description: "Another account's endpoint, or one already deleted, is not found (exit 1).",
  options: { json: { type: "boolean", help: "print the service's answer as JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const deleted = await ctx.webhooksClient().webhooks.delete(positionals[0]!, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(deleted)}\n` : `${deleted.id} deleted\n`);
  },
};

const rotateSecret: Command = {
  name: "rotate-secret",
  summary: "Give an endpoint a new signing secret; prints it, shown only now",
  usage: "svc webhooks rotate-secret ID [--json]",
  description: [
    `Deliveries are signed with the previous secret too for ${WEBHOOK_LIMITS.previousSecretMs / 3_600_000} hours, so a receiver can switch to the`,
    "new one meanwhile. Another account's endpoint is not found (exit 1).",
  ].join("\n"),
  options: { json: { type: "boolean", help: "print the endpoint as JSON (its new secret included)" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const endpoint = await ctx.webhooksClient().webhooks.rotateSecret(positionals[0]!, { signal: ctx.signal });
    printSecret(ctx, values.json === true, endpoint, `New signing secret for webhook endpoint ${endpoint.id}; the previous one also signs until ${new Date(Date.parse(endpoint.secret_rotated_at!) + WEBHOOK_LIMITS.previousSecretMs).toISOString()}.`);
  },
};

const deliveries: Command = {
  name: "deliveries",
  summary: "List an endpoint's deliveries, newest first: event, job, status, attempts, last outcome",
  usage: "svc webhooks deliveries ID [--limit N] [--after ID] [--json]",
  description: [
    "LAST is the receiver's HTTP status at the last attempt, or why no answer came (timeout,",
    "connection_failed, address_not_allowed, redirect). A pending delivery is tried again after each",
    "wait, for about a day, then failed.",
  ].join("\n"),
  options: {
    limit: { type: "string", value: "N", help: `deliveries per page, 1 to ${WEBHOOK_LIMITS.page.max} (default ${WEBHOOK_LIMITS.page.default})` },
    after: { type: "string", value: "ID", help: "the page after this delivery (the cursor a previous page printed)" },
    json: { type: "boolean", help: "print the response JSON" },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= WEBHOOK_LIMITS.page.max)) throw new UsageError(`--limit is an integer from 1 to ${WEBHOOK_LIMITS.page.max}`);
    const id = positionals[0]!;
    const page = await ctx.webhooksClient().webhooks.deliveries.list(id, { limit, after: values.after as string | undefined }, { signal: ctx.signal });
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify(page)}\n`);
      return;
    }
    ctx.stdout.write(renderDeliveries(page.data));
    const last = page.data.at(-1);
    if (page.has_more && last) ctx.status(`More: svc webhooks deliveries ${id} --after ${last.id}`);
  },
};

export const webhooks: Group = {
  name: "webhooks",
  summary: "Manage the account's webhook endpoints: create, list, get, delete, rotate-secret, deliveries",
  description: [
    "An endpoint is told, by a signed POST, when a batch or a training of the account ends. Webhook",
    "management takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN with SVC_BASE_URL),",
    "not an API key.",
  ].join("\n"),
  commands: [create, list, get, remove, rotateSecret, deliveries],
};
