/**
 * Webhooks on the wire: an account's HTTPS endpoints, told when its jobs end, signed in the Standard
 * Webhooks format (https://www.standardwebhooks.com). Edge, sidecar, tests, SDKs and the CLI import
 * these. The routes take the signed-in user's access token, as key management does.
 *
 *     POST   /v1/webhooks {"url": "https://example.com/hooks", "events": ["batch.completed"]}
 *              -> 201 WebhookEndpoint with `secret` (whsec_..., shown at creation and rotation only)
 *     GET    /v1/webhooks                         -> {object: "list", data: [WebhookEndpoint, ...]}, newest first
 *     GET    /v1/webhooks/{id}                    -> WebhookEndpoint
 *     DELETE /v1/webhooks/{id}                    -> {id, object, deleted: true}; its pending deliveries go with it
 *     POST   /v1/webhooks/{id}/rotate_secret {}   -> WebhookEndpoint with the new `secret`
 *     GET    /v1/webhooks/{id}/deliveries?limit=&after=   -> WebhookDeliveryList, newest first
 *
 * Delivery. A job's move into a terminal status writes one delivery per subscribed endpoint in the
 * same transaction (schema.sql job_webhook_outbox), so an event exists exactly when its change
 * committed. The sidecar's worker POSTs it (`WebhookEvent` as JSON) with the headers
 *
 *     webhook-id: <the event's id, the same on every retry: a receiver drops repeats by it>
 *     webhook-timestamp: <unix seconds of this attempt>
 *     webhook-signature: v1,<base64 HMAC-SHA256(secret, `${id}.${timestamp}.${body}`)>  [ v1,<...> with the previous secret]
 *
 * A 2xx answer within `attemptTimeoutMs` delivers it; anything else (another status, a redirect, a
 * timeout, a refused connection) is retried after each wait of `retryDelaysMs` (about a day in all),
 * then marked failed. Each endpoint and each account has a few attempts in flight at most
 * (`inFlight`), so one account's slow endpoints delay only its own deliveries. At least once: a sidecar that dies mid-attempt leaves it to be sent again.
 * After a rotation the previous secret also signs for `previousSecretMs`, so receivers can switch; a
 * second rotation within that time replaces it (only the two latest secrets ever sign).
 *
 * Where an endpoint may point (`checkWebhookUrl`): HTTPS to a public address. Plain HTTP and
 * private, loopback, link-local and other non-public addresses are refused, at registration (names
 * and literal addresses) and again before each attempt (every address the name resolves to). A local
 * stack allows loopback receivers (`WEBHOOK_PRIVATE_TARGETS=on`, never in production).
 */
import { z } from "zod";
import { TERMINAL_STATUSES } from "./batches.ts";
import { fields } from "./fields.ts";
import { TRAINING_TERMINAL_STATUSES } from "./trainings.ts";

/**
 * The events an endpoint may subscribe to: a batch or a training entering a terminal status
 * (`training.ready`: API ready). `<kind>.<status>` for each of TERMINAL_STATUSES and
 * TRAINING_TERMINAL_STATUSES, as the outbox trigger names them (`jobEvents` checks the two agree).
 */
export const WEBHOOK_EVENTS = [
  "batch.completed", "batch.failed", "batch.cancelled", "batch.expired",
  "training.ready", "training.rejected", "training.failed", "training.cancelled", "training.expired",
] as const;
export const WebhookEventType = z.enum(WEBHOOK_EVENTS, { error: `an event must be one of ${WEBHOOK_EVENTS.join(", ")}` });
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** `<kind>.<status>` for every terminal status of both kinds of job: what the trigger can write. */
export const jobEvents = (): string[] => [...TERMINAL_STATUSES.map((s) => `batch.${s}`), ...TRAINING_TERMINAL_STATUSES.map((s) => `training.${s}`)];

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export const WEBHOOK_LIMITS = {
  /** Endpoints an account may have at once. */
  endpoints: 16,
  urlChars: 2048,
  descriptionChars: 256,
  /** How long one attempt may take, from resolving the endpoint's name to its answer. */
  attemptTimeoutMs: 10 * SECOND,
  /**
   * Attempts in flight at once to one endpoint, and to all of one account's endpoints, counted
   * across every sender: an endpoint that hangs holds at most its account's places, never another's.
   */
  inFlight: { perEndpoint: 2, perAccount: 4 },
  /** The waits before each retry: 11 attempts over about 25 hours, then the delivery is failed. */
  retryDelaysMs: [5 * SECOND, 30 * SECOND, 2 * MINUTE, 10 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 8 * HOUR],
  /** After a rotation, how long the previous secret also signs. */
  previousSecretMs: 24 * HOUR,
  /** Finished deliveries are kept this long in the log. */
  deliveryRetentionMs: 30 * 24 * HOUR,
  /** Deliveries per page of the log: the default, and the most `limit` may ask for. */
  page: { default: 20, max: 100 },
} as const;

/** An endpoint's signing secret: `whsec_` and the base64 of 32 random bytes (the key HMAC uses). */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[A-Za-z0-9+/]{43}=$/;

export const CreateWebhookRequest = fields({
  url: z
    .string({ error: (issue) => (issue.input === undefined ? "url is required" : "url must be a string") })
    .max(WEBHOOK_LIMITS.urlChars, `url must be at most ${WEBHOOK_LIMITS.urlChars} characters`),
  events: z
    .array(WebhookEventType, { error: (issue) => (issue.input === undefined ? "events is required" : "events must be an array of event names") })
    .min(1, "events must name at least one event")
    .max(WEBHOOK_EVENTS.length)
    .refine((events) => new Set(events).size === events.length, "events must not repeat an event"),
  description: z.string().max(WEBHOOK_LIMITS.descriptionChars, `description must be at most ${WEBHOOK_LIMITS.descriptionChars} characters`).optional(),
});
export type CreateWebhookRequest = z.infer<typeof CreateWebhookRequest>;

export const WebhookEndpoint = z.object({
  id: z.string(),
  object: z.literal("webhook_endpoint"),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().nullable(),
  created_at: z.string(),
  /** When the secret was last rotated; null if never. */
  secret_rotated_at: z.string().nullable(),
});
export type WebhookEndpoint = z.infer<typeof WebhookEndpoint>;

/** Creation and rotation answers: the only times the secret is shown. */
export const WebhookEndpointWithSecret = WebhookEndpoint.extend({ secret: z.string().regex(WEBHOOK_SECRET_PATTERN) });
export type WebhookEndpointWithSecret = z.infer<typeof WebhookEndpointWithSecret>;

export const WebhookEndpointList = z.object({ object: z.literal("list"), data: z.array(WebhookEndpoint) });
export type WebhookEndpointList = z.infer<typeof WebhookEndpointList>;

export const DeletedWebhookEndpoint = z.object({ id: z.string(), object: z.literal("webhook_endpoint"), deleted: z.literal(true) });
export type DeletedWebhookEndpoint = z.infer<typeof DeletedWebhookEndpoint>;

/** What an endpoint receives: the job as it ended (fetch it for the rest). */
export const WebhookEvent = z.object({
  type: z.string(),
  /** When the change committed (RFC 3339, UTC). */
  timestamp: z.string(),
  data: z.object({
    object: z.enum(["batch", "training"]),
    id: z.string(),
    status: z.string(),
    metadata: z.record(z.string(), z.string()).nullable(),
  }),
});
export type WebhookEvent = z.infer<typeof WebhookEvent>;

export const WEBHOOK_DELIVERY_STATUSES = ["pending", "delivered", "failed"] as const;

/** One event's delivery to one endpoint, as its log shows it. */
export const WebhookDelivery = z.object({
  id: z.string(),
  object: z.literal("webhook_delivery"),
  /** The event's id: the `webhook-id` header. */
  event_id: z.string(),
  event_type: z.string(),
  /** The batch or training the event is about. */
  job_id: z.string(),
  status: z.enum(WEBHOOK_DELIVERY_STATUSES),
  attempts: z.number().int(),
  created_at: z.string(),
  last_attempt_at: z.string().nullable(),
  /** The receiver's HTTP status at the last attempt; null when none came (timeout, refused, not allowed). */
  last_status_code: z.number().int().nullable(),
  /** Why the last attempt failed, when it did: `http_status`, `timeout`, `connection_failed`, `address_not_allowed`, `redirect`. */
  last_error: z.string().nullable(),
  /** When a pending delivery is tried next. */
  next_attempt_at: z.string().nullable(),
  finished_at: z.string().nullable(),
});
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookDeliveryList = z.object({ object: z.literal("list"), data: z.array(WebhookDelivery), has_more: z.boolean() });
export type WebhookDeliveryList = z.infer<typeof WebhookDeliveryList>;

// ---- Where an endpoint may point ----

/**
 * Checks an endpoint URL against the policy above (literal addresses and names only; the sidecar
 * checks resolved addresses with `isPublicAddress` before each attempt). Returns the URL or a reason.
 */
export function checkWebhookUrl(raw: string, opts: { privateTargets: boolean }): { url: URL } | { error: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { error: "url is not a valid absolute URL" };
  }
  if (url.username || url.password) return { error: "url must not carry credentials" };
  const host = url.hostname;
  const loopback = host === "localhost" || host.endsWith(".localhost") || (isIpLiteral(host) && isLoopbackAddress(unbracket(host)));
  if (opts.privateTargets && loopback && (url.protocol === "http:" || url.protocol === "https:")) return { url };
  if (url.protocol !== "https:") return { error: `url must use https:// (got ${url.protocol})` };
  if (loopback || host.endsWith(".local") || host.endsWith(".internal") || !host.includes(".") && !isIpLiteral(host)) {
    return { error: `url must point at a public host, not ${host}` };
  }
  if (isIpLiteral(host) && !isPublicAddress(unbracket(host)) && !opts.privateTargets) return { error: `url must point at a public address, not ${host}` };
  return { url };
}

/** A URL's hostname as an address or name to resolve: an IPv6 literal without its brackets. */
export const unbracket = (host: string) => host.replace(/^\[(.*)\]$/, "$1");
/** Whether a URL's hostname is an address rather than a name (WHATWG URL writes every IPv4 form dotted). */
export const isIpLiteral = (host: string) => host.startsWith("[") || /^\d+\.\d+\.\d+\.\d+$/.test(host);

/** IPv4 ranges that are not public (RFC 6890 and friends), as [first octets as a number, prefix length]. */
const V4_PRIVATE: readonly [string, number][] = [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.88.99.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4],
];

function v4Number(address: string): number | null {
  const parts = address.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

function v4InRange(n: number, [base, bits]: readonly [string, number]): boolean {
  const size = 2 ** (32 - bits);
  return Math.floor(n / size) === Math.floor(v4Number(base)! / size);
}

/** The 8 16-bit groups of an IPv6 address (an embedded IPv4 tail included), or null. */
function v6Groups(address: string): number[] | null {
  let text = address.toLowerCase().replace(/%.*$/, "");
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const n = v4Number(tail[1]!);
    if (n === null) return null;
    text = `${text.slice(0, -tail[1]!.length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const side = (s: string) => (s === "" ? [] : s.split(":"));
  const head = side(halves[0]!);
  const rest = halves.length === 2 ? side(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return null;
  return groups.map((g) => parseInt(g, 16));
}

function isLoopbackAddress(address: string): boolean {
  const v4 = v4Number(address);
  if (v4 !== null) return v4InRange(v4, ["127.0.0.0", 8]);
  const g = v6Groups(address);
  return g !== null && g.slice(0, 7).every((x) => x === 0) && g[7] === 1;
}

/** Whether a resolved address (IPv4 or IPv6 text) is public: not private, loopback, link-local, reserved or the like. */
export function isPublicAddress(address: string): boolean {
  const v4 = v4Number(address);
  if (v4 !== null) return v4 !== 0xffffffff && !V4_PRIVATE.some((range) => v4InRange(v4, range));
  const g = v6Groups(address);
  if (!g) return false;
  const embeddedV4 = () => `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) return g[5] === 0xffff ? isPublicAddress(embeddedV4()) : false; // mapped, or :: / ::1 / compatible
  if (g[0] === 0x64 && g[1] === 0xff9b) return isPublicAddress(embeddedV4()); // NAT64
  if ((g[0]! & 0xfe00) === 0xfc00) return false; // unique local
  if ((g[0]! & 0xffc0) === 0xfe80) return false; // link-local
  if ((g[0]! & 0xff00) === 0xff00) return false; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return false; // documentation
  if (g[0] === 0x0100 && g.slice(1, 4).every((x) => x === 0)) return false; // discard
  if (g[0] === 0x2002) return isPublicAddress(`${g[1]! >> 8}.${g[1]! & 255}.${g[2]! >> 8}.${g[2]! & 255}`); // 6to4
  return (g[0]! & 0xe000) === 0x2000; // global unicast 2000::/3
}
