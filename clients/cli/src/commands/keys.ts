/**
 * `svc keys ...` (runs in a user's terminal): the account's API keys. Key management takes the
 * signed-in user's access token (the browser sign-in `svc login` saved, or SVC_ACCESS_TOKEN), never
 * an API key, as `svc train` does.
 *
 *     svc keys create ci --scope decisions --model svc-shared --expires-in 30d   prints the secret, once
 *     svc keys list                                                             name, id, status, scope, models, expires
 *     svc keys revoke ID
 *
 * The secret of a new key is the only thing on standard output (so `svc keys create ci > key.txt`
 * keeps it and nothing else); what the key may do goes to standard error.
 */
import type { Command, Group, Parsed } from "../command.ts";
import { UsageError } from "../errors.ts";
import { renderKeys } from "../render.ts";
import { KEY_MODELS_MAX, KEY_SCOPES, type CreatedKey, type KeyMetadata, type KeyScope } from "../sdk.ts";

/** The units of --expires-in, in milliseconds. */
const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };
/** An RFC 3339 date-time with its offset, as the service takes it (it checks the calendar itself). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** --expires-at or --expires-in as the ISO time to send, or undefined for a key that never expires. */
export function expiry(values: Parsed["values"], now = Date.now()): string | undefined {
  const at = values["expires-at"] as string | undefined;
  const after = values["expires-in"] as string | undefined;
  if (at !== undefined && after !== undefined) throw new UsageError("give --expires-at or --expires-in, not both");
  if (at !== undefined) {
    const when = Date.parse(at);
    if (!RFC3339.test(at) || Number.isNaN(when)) throw new UsageError("--expires-at is an RFC 3339 time with its offset, e.g. 2026-12-31T00:00:00Z");
    if (when <= now) throw new UsageError("--expires-at must be in the future");
    return at;
  }
  if (after !== undefined) {
    const match = /^(\d{1,6})([mhdw])$/.exec(after.trim());
    const amount = match ? Number(match[1]) : 0;
    if (!match || amount <= 0) throw new UsageError("--expires-in is a whole number of minutes, hours, days or weeks: 90m, 12h, 30d, 2w");
    return new Date(now + amount * UNITS[match[2]!]!).toISOString();
  }
  return undefined;
}

function scopeOf(values: Parsed["values"]): KeyScope | undefined {
  const scope = values.scope as string | undefined;
  if (scope !== undefined && !(KEY_SCOPES as readonly string[]).includes(scope)) throw new UsageError(`--scope is ${KEY_SCOPES.join(" or ")}`);
  return scope as KeyScope | undefined;
}

function modelsOf(values: Parsed["values"]): string[] | undefined {
  const models = values.model as string[] | undefined;
  if (models === undefined) return undefined;
  if (models.some((m) => m.trim() === "")) throw new UsageError("--model names a model (an alias or a release id)");
  if (models.length > KEY_MODELS_MAX) throw new UsageError(`a key may be limited to at most ${KEY_MODELS_MAX} models`);
  return models;
}

/** What a key may do, in words: `decisions only, models svc-shared, until 2026-...`. */
export function limitsOf(key: KeyMetadata): string {
  const scope = key.scope === null ? "every route an API key can call" : key.scope === "decisions" ? "decisions only" : "decisions and batches";
  const models = key.models === null ? "any model" : `model${key.models.length === 1 ? "" : "s"} ${key.models.join(", ")}`;
  return `${scope}, ${models}, ${key.expires_at === null ? "never expires" : `until ${key.expires_at}`}`;
}

const create: Command = {
  name: "create",
  summary: "Create an API key; prints its secret, shown this once",
  usage: "svc keys create NAME [--expires-at TIME | --expires-in DURATION] [--scope SCOPE] [--model M ...] [--json]",
  description: [
    "Prints the new key's secret on standard output (the only time it is ever shown: keep it now, e.g.",
    "`svc keys create ci > ci.key`, or save it with `svc login --api-key -`); its id and what it may do",
    "go to standard error. Without limits, the key can do what the account can, for ever.",
    "",
    "--expires-at (RFC 3339 with its offset) or --expires-in (90m, 12h, 30d, 2w): after then, every",
    "call with the key is refused (401 expired_key). --scope decisions: decisions, models, image assets",
    "and credit, no batches; decisions_and_batches: those and batches. --model, once per model (at",
    `most ${KEY_MODELS_MAX}): the only models its decisions and batch records may name. A call beyond the`,
    "key's scope or models is refused (403 insufficient_scope).",
    "",
    "Takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN), not an API key.",
  ].join("\n"),
  options: {
    "expires-at": { type: "string", value: "TIME", help: "when the key stops working (RFC 3339, e.g. 2026-12-31T00:00:00Z)" },
    "expires-in": { type: "string", value: "DURATION", help: "how long the key works from now: 90m, 12h, 30d, 2w" },
    scope: { type: "string", value: "SCOPE", help: `what the key may call: ${KEY_SCOPES.join(" or ")} (default: everything)` },
    model: { type: "string", value: "M", multiple: true, help: "a model the key may name (repeat for more; default: any)" },
    json: { type: "boolean", help: "print the created key as JSON (its secret included)" },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const params = { name: positionals[0]!, expiresAt: expiry(values), scope: scopeOf(values), models: modelsOf(values) };
    const key: CreatedKey = await ctx.keysClient().keys.create(params, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(key)}\n` : `${key.secret}\n`);
    ctx.status(`Created key ${JSON.stringify(key.name)} (id ${key.id}): ${limitsOf(key)}.`);
    if (!values.json) ctx.status("The secret above is shown this once: keep it now. Revoke the key with `svc keys revoke ID`.");
  },
};

const list: Command = {
  name: "list",
  summary: "List the account's API keys, newest first: name, id, status, scope, models, expiry",
  usage: "svc keys list [--json]",
  description: "Never shows a secret. SCOPE `all` and MODELS `any` mean no limit; a revoked or expired key is listed with its status.",
  options: { json: { type: "boolean", help: "print the response JSON" } },
  async run(ctx, { values }) {
    const { keys } = await ctx.keysClient().keys.list({ signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify({ keys })}\n` : renderKeys(keys));
  },
};

const revoke: Command = {
  name: "revoke",
  summary: "Revoke an API key: every later call with it is refused (401 revoked_key)",
  usage: "svc keys revoke ID [--json]",
  description: "ID is the key's id, as `svc keys list` shows it. Revoking a revoked key changes nothing; another account's key is not found (exit 1).",
  options: { json: { type: "boolean", help: "print the revoked key's metadata as JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const key = await ctx.keysClient().keys.revoke(positionals[0]!, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(key)}\n` : `${key.id} revoked\n`);
  },
};

export const keys: Group = {
  name: "keys",
  summary: "Manage the account's API keys: create (limited in time, scope and models), list, revoke",
  description: [
    "Key management takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN with",
    "SVC_BASE_URL), not an API key.",
  ].join("\n"),
  commands: [create, list, revoke],
};
