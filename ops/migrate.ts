/**
 * `npm run db:migrate`: applies schema.sql to DATABASE_URL (or the running local stack's). Runs on an operator's machine or the
 * local stack launcher. Safe to repeat and to run concurrently (an advisory lock serialises runs).
 * Everything happens in one transaction, with a transaction-scoped lock and setting, so it also runs
 * through a transaction pooler such as Neon's pooled connection string, and a failed run changes nothing.
 */
import { readFileSync } from "node:fs";
import pg from "pg";
import { databaseUrl } from "./command.ts";

const SCHEMA_PATH = new URL("../schema.sql", import.meta.url);
const MIGRATION_LOCK = 7_245_001;

export async function migrate(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    // Notices such as "relation already exists, skipping" are expected on every repeat.
    await client.query("SET LOCAL client_min_messages = warning");
    await client.query(readFileSync(SCHEMA_PATH, "utf8"));
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}

if (import.meta.main) {
  await migrate(databaseUrl());
  console.error("schema applied");
}
