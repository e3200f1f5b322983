/**
 * A model registry entry as every tier reads it from Postgres (`model_registry` view in schema.sql).
 * The runtime address and the name of its secret's variable never leave the server side.
 */
import { z } from "zod";

export const RegistryEntry = z.object({
  id: z.string(),
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  aliases: z.array(z.string()),
  owners: z.array(z.string().uuid()).nullable(),
  url: z.string(),
  token_env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/),
  release_date: z.union([z.string(), z.date()]).transform((d) => (typeof d === "string" ? d.slice(0, 10) : d.toISOString().slice(0, 10))),
  description: z.string(),
  retired_at: z.union([z.string(), z.date()]).nullable(),
});
export type RegistryEntry = z.infer<typeof RegistryEntry>;

/** The SQL that reads every serving (not retired) entry. */
export const SELECT_SERVING_RELEASES =
  "SELECT id, fingerprint, aliases, owners, url, token_env, release_date, description, retired_at FROM model_registry WHERE retired_at IS NULL ORDER BY id";
