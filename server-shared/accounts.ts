/**
 * Account settings: quotas that apply to every key of an account. Null means no quota; a set value
 * is a positive integer.
 */
import { z } from "zod";

export const QUOTA_SETTINGS = [
  "requests_per_second",
  "tokens_per_second",
  "max_active_batches",
  "max_batch_storage_bytes",
] as const;
export type QuotaSetting = (typeof QUOTA_SETTINGS)[number];

export const AccountSettings = z.object({
  requests_per_second: z.number().int().positive().nullable(),
  tokens_per_second: z.number().int().positive().nullable(),
  max_active_batches: z.number().int().positive().nullable(),
  max_batch_storage_bytes: z.number().int().positive().nullable(),
});
export type AccountSettings = z.infer<typeof AccountSettings>;

export const ACCOUNT_STATUSES = ["active", "disabled"] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];
