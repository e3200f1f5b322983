/**
 * Settings of a server tier, parsed once at start with zod. A missing or bad setting stops the tier
 * with one line that names it:
 *
 *     sidecar: setting SIDECAR_SECRET is required; setting SIDECAR_PORT must be an integer from 0 to 65535
 *
 *     const settings = parseSettings("sidecar", SidecarSettings, process.env);
 */
import { z } from "zod";
import { checkServiceUrl } from "../contract/urls.ts";
import { parseSecretList } from "./secret-list.ts";
import { webhookKeyProblem } from "./webhook-secrets.ts";

export class SettingsError extends Error {
  override readonly name = "SettingsError";
}

export function parseSettings<T extends z.ZodType>(tier: string, schema: T, env: Record<string, unknown>): z.infer<T> {
  const parsed = schema.safeParse(env, {
    error: (issue) => (issue.input === undefined || issue.input === "" ? "is required" : undefined),
  });
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `setting ${issue.path.join(".")} ${issue.message}`);
  throw new SettingsError(`${tier}: ${problems.join("; ")}`);
}

/** A non-empty string (secrets, connection strings). */
export const required = () => z.string().min(1, "is required");

/** An optional setting: unset and empty both read as absent. */
export const optional = () =>
  z
    .string()
    .optional()
    .transform((value) => (value === "" ? undefined : value));

/** An integer setting within [min, max], with a default when unset. */
export function integer(min: number, max: number, fallback?: number) {
  const value = required().pipe(
    z.coerce.number<string>().refine((n) => Number.isInteger(n) && n >= min && n <= max, `must be an integer from ${min} to ${max}`),
  );
  return fallback === undefined ? value : z.preprocess((v) => (v === undefined || v === "" ? String(fallback) : v), value);
}

/** An on/off switch with a default when unset or empty. */
export const flag = (fallback: "on" | "off") => z.preprocess((v) => (v === undefined || v === "" ? fallback : v), z.enum(["on", "off"]));

/** An optional integer setting within [min, max]: unset and empty read as absent. */
export const optionalInteger = (min: number, max: number) => z.preprocess((v) => (v === "" ? undefined : v), integer(min, max).optional());

/** An optional service URL: unset and empty read as absent; a set one obeys the transport policy. */
export const optionalServiceUrl = () => z.preprocess((v) => (v === "" ? undefined : v), serviceUrl().optional());

/** A shared secret as a rotation list, `new,old` (server-shared/secret-list.ts). */
export const secretList = () =>
  required().transform((raw, ctx) => {
    try {
      return parseSecretList(raw);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
  });

/** A secret list that may be left unset (or empty): absent then. */
export const optionalSecretList = () => z.preprocess((v) => (v === "" ? undefined : v), secretList().optional());

/** The keys that seal webhook secrets as a rotation list, `new,old`, each the base64 of 32 bytes (server-shared/webhook-secrets.ts). */
export const webhookKeyList = () =>
  secretList().superRefine((list, ctx) => {
    const problem = webhookKeyProblem(list);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/** A service URL under the transport policy: https anywhere, plain http on loopback only. */
export const serviceUrl = () =>
  required().superRefine((raw, ctx) => {
    try {
      checkServiceUrl(raw, "the");
    } catch (err) {
      ctx.addIssue({ code: "custom", message: `is not allowed: ${(err as Error).message}` });
    }
  });
