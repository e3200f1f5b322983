/**
 * A model registry entry as the server tiers and operator commands read it from Postgres
 * (`model_registry` view in schema.sql). The runtime address, the name of its secret's variable and
 * the sidecar address never leave the server side.
 */
import { z } from "zod";

export const RegistryEntry = z.object({
  id: z.string(),
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  aliases: z.array(z.string()),
  owners: z.array(z.string().uuid()).nullable(),
  /** Runtime address; only the sidecar calls it. */
  url: z.string(),
  token_env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/),
  release_date: z.union([z.string(), z.date()]).transform((d) => (typeof d === "string" ? d.slice(0, 10) : d.toISOString().slice(0, 10))),
  description: z.string(),
  retired_at: z.union([z.string(), z.date()]).nullable(),
  /** The sidecar that serves this release (the edge forwards its decisions there); null: none yet. */
  sidecar_url: z.string().nullable(),
});
export type RegistryEntry = z.infer<typeof RegistryEntry>;

export const REGISTRY_COLUMNS = "id, fingerprint, aliases, owners, url, token_env, release_date, description, retired_at, sidecar_url";
