/**
 * `npm run db:migrate`: brings DATABASE_URL's database (or the running local stack's) to the schema of
 * this checkout. Runs on an operator's machine or from the local stack launcher.
 *
 * - An empty database gets schema.sql whole and is recorded at the latest version of migrations/.
 * - A database at an older version gets each numbered file of migrations/ after it, in order, each
 *   recorded in `schema_migrations` (version, name, applied_at).
 * - A database made by the unversioned schema.sql of before (its tables, no `schema_migrations`) is
 *   at version 0.
 *
 * Everything happens in one transaction under a transaction-scoped advisory lock, with no session
 * state, so a concurrent run waits and then finds nothing to do, a failed run changes nothing, and it
 * also runs through a transaction pooler such as Neon's pooled connection string.
 *
 * No migration tool from the registry fits that: node-pg-migrate, graphile-migrate and
 * @slonik/migrator lock with session-level advisory locks (pg_advisory_lock or pg_try_advisory_lock,
 * then pg_advisory_unlock, which a transaction pooler may run on another server connection) and issue
 * their own BEGIN and COMMIT, while dbmate and db-migrate take no lock and commit each migration
 * separately, and ley runs JavaScript migrations only. postgrator alone can run inside our transaction
 * (it neither locks nor begins one), but it cannot build a fresh database from schema.sql and record
 * it, which would leave it only the loop over files below, not worth a dependency.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { databaseUrl } from "./command.ts";

const SCHEMA_PATH = new URL("../schema.sql", import.meta.url);
const MIGRATIONS_DIR = new URL("../migrations/", import.meta.url);
const MIGRATION_LOCK = 7_245_001;
const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

export interface Migration {
  version: number;
  name: string;
  path: string;
}

export interface MigrateResult {
  /** The version found: null for an empty database, 0 for one made by the unversioned schema.sql. */
  from: number | null;
  to: number;
}

/** The numbered files of `dir`, in order; refuses a gap or a stray file, which would skip or hide a step. */
export function readMigrations(dir: URL | string = MIGRATIONS_DIR): Migration[] {
  const path = typeof dir === "string" ? dir : fileURLToPath(dir);
  const migrations = readdirSync(path)
    .sort()
    .map((file, i) => {
      const match = MIGRATION_FILE.exec(file);
      if (!match) throw new Error(`${file} in ${path} is not a migration: name it NNNN_name.sql`);
      const version = Number(match[1]);
      if (version !== i + 1) throw new Error(`${file} in ${path} should be version ${i + 1}: versions run 1, 2, 3... with no gap`);
      return { version, name: match[2]!, path: join(path, file) };
    });
  if (migrations.length === 0) throw new Error(`no migrations in ${path}`);
  return migrations;
}

export async function migrate(databaseUrl: string, opts: { migrationsDir?: URL | string } = {}): Promise<MigrateResult> {
  const migrations = readMigrations(opts.migrationsDir);
  const latest = migrations.at(-1)!;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    const from = await currentVersion(client);
    if (from === null) {
      await client.query(readFileSync(SCHEMA_PATH, "utf8"));
      await record(client, latest);
    } else if (from > latest.version) {
      throw new Error(`the database is at version ${from}, newer than this checkout's ${latest.version}: migrate from a newer checkout`);
    } else {
      for (const migration of migrations.filter((m) => m.version > from)) {
        await client.query(readFileSync(migration.path, "utf8"));
        await record(client, migration);
      }
    }
    await client.query("COMMIT");
    return { from, to: latest.version };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}

/** The recorded version; 0 when the tables of the unversioned schema are there without a record; null when neither is. */
async function currentVersion(client: pg.Client): Promise<number | null> {
  const { rows } = await client.query<{ versioned: boolean; unversioned: boolean }>(
    "SELECT to_regclass('schema_migrations') IS NOT NULL AS versioned, to_regclass('model_releases') IS NOT NULL AS unversioned",
  );
  if (rows[0]!.versioned) {
    const recorded = await client.query<{ version: number }>("SELECT max(version) AS version FROM schema_migrations");
    return recorded.rows[0]!.version ?? 0;
  }
  return rows[0]!.unversioned ? 0 : null;
}

async function record(client: pg.Client, migration: Migration): Promise<void> {
  await client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [migration.version, migration.name]);
}

if (import.meta.main) {
  const { from, to } = await migrate(databaseUrl());
  if (from === null) console.error(`schema created at version ${to}`);
  else if (from === to) console.error(`schema already at version ${to}`);
  else console.error(`schema migrated from version ${from} to ${to}`);
}
