/**
 * GET /v1/models with an API key (runs in workerd): the serving releases the account may use (shared
 * ones and those it owns), each with its aliases. Addresses and secret names never leave the server.
 */
import { Hono } from "hono";
import type { ModelList } from "../../contract/models.ts";
import { apiKeyAuth } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const models = new Hono<AppEnv>();

models.get("/v1/models", apiKeyAuth, quota(), async (c) => {
  const rows = await services(c.env).sql`
    SELECT id, aliases, description, release_date::text AS release_date
      FROM model_registry
     WHERE retired_at IS NULL AND (owners IS NULL OR ${c.get("account").id}::uuid = ANY (owners))
     ORDER BY release_date DESC, id`;
  const body: ModelList = {
    models: rows.map((row) => ({
      name: String(row.id),
      aliases: row.aliases as string[],
      description: String(row.description),
      release_date: String(row.release_date),
    })),
  };
  return c.json(body);
});
