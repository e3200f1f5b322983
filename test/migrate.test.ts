/**
 * `npm run db:migrate` (ops/migrate.ts) on scratch databases of the shared stack's Postgres: a
 * database of the last unversioned schema (test/fixtures/schema-e05f56b.sql, version 0) migrated
 * through migrations/ has the same catalog as a fresh one built from schema.sql, keeps its rows, and
 * is recorded at the latest version; a repeat changes nothing and a failed run leaves no trace.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { BATCH_STATUSES, TERMINAL_STATUSES } from "../contract/batches.ts";
import { TRAINING_STATUSES, TRAINING_TERMINAL_STATUSES } from "../contract/trainings.ts";
import { migrate, readMigrations } from "../ops/migrate.ts";
import { query, stack } from "./support/api.ts";

const LEGACY_SCHEMA = readFileSync(new URL("./fixtures/schema-e05f56b.sql", import.meta.url), "utf8");
const MIGRATIONS = readMigrations();
const LATEST = MIGRATIONS.at(-1)!;

const scratch: string[] = [];

/** A new empty database on the stack's server; its URL. Dropped when the file ends. */
async function createDatabase(): Promise<string> {
  const name = `migrate_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  await query(`CREATE DATABASE ${name}`);
  scratch.push(name);
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

afterAll(async () => {
  for (const name of scratch) await query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
});

async function withClient<T>(url: string, run: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    return await run(db);
  } finally {
    await db.end();
  }
}

/** A database as the unversioned `npm run db:migrate` left it: the old schema.sql applied whole. */
async function versionZeroDatabase(): Promise<string> {
  const url = await createDatabase();
  await withClient(url, (db) => db.query(LEGACY_SCHEMA));
  return url;
}

const CATALOG = {
  relations: `SELECT c.relname AS name, c.relkind AS kind FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace`,
  // Columns are compared as a set, not in attnum order: the unversioned schema added columns with
  // ALTER TABLE at the end of their tables, where schema.sql now declares them among their kin.
  columns: `SELECT c.relname AS relation, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
                   pg_get_expr(d.adbin, d.adrelid) AS default
              FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
              LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v', 'c') AND a.attnum > 0 AND NOT a.attisdropped`,
  constraints: `SELECT conrelid::regclass::text AS relation, conname AS name, contype AS kind, pg_get_constraintdef(oid) AS definition
                  FROM pg_constraint WHERE connamespace = 'public'::regnamespace`,
  indexes: `SELECT tablename AS relation, indexname AS name, indexdef AS definition FROM pg_indexes WHERE schemaname = 'public'`,
  sequences: `SELECT sequencename AS name, data_type, start_value, increment_by, min_value, max_value, cycle FROM pg_sequences WHERE schemaname = 'public'`,
  views: `SELECT viewname AS name, definition FROM pg_views WHERE schemaname = 'public'`,
  functions: `SELECT proname AS name, pg_get_function_identity_arguments(oid) AS arguments, pg_get_functiondef(oid) AS definition
                FROM pg_proc WHERE pronamespace = 'public'::regnamespace`,
  triggers: `SELECT tgrelid::regclass::text AS relation, tgname AS name, pg_get_triggerdef(oid) AS definition
               FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)`,
  types: `SELECT typname AS name, typtype AS kind FROM pg_type WHERE typnamespace = 'public'::regnamespace`,
};

/** Everything the schema defines, each list in a stable order, so two databases compare with toEqual. */
async function catalog(url: string): Promise<Record<string, unknown[]>> {
  return withClient(url, async (db) => {
    const parts: Record<string, unknown[]> = {};
    for (const [part, sql] of Object.entries(CATALOG)) {
      parts[part] = (await db.query(`SELECT to_jsonb(x) AS row FROM (${sql}) x ORDER BY to_jsonb(x)::text`)).rows.map((r) => r.row);
    }
    return parts;
  });
}

const LEGACY_TABLES = ["model_releases", "model_aliases", "accounts", "api_keys", "usage_records", "batches", "batch_records", "batch_results"];

/** Every row of the tables of the unversioned schema. */
async function rows(url: string): Promise<Record<string, unknown[]>> {
  return withClient(url, async (db) => {
    const all: Record<string, unknown[]> = {};
    for (const table of LEGACY_TABLES) {
      all[table] = (await db.query(`SELECT to_jsonb(t) AS row FROM ${table} t ORDER BY to_jsonb(t)::text`)).rows.map((r) => r.row);
    }
    return all;
  });
}

async function recorded(url: string): Promise<Array<{ version: number; name: string; applied_at: Date }>> {
  return withClient(url, async (db) => (await db.query("SELECT version, name, applied_at FROM schema_migrations ORDER BY version")).rows);
}

/** A release, an account with a key, a finished batch with results and usage, and a running batch mid-way with its lease. */
async function addRows(url: string): Promise<{ runningBatch: string; leaseToken: string; finishedBatch: string }> {
  return withClient(url, async (db) => {
    await db.query(
      `INSERT INTO model_releases (id, fingerprint, url, token_env, release_date, sidecar_url) VALUES ('rel-1', repeat('a', 64), 'http://127.0.0.1:1', 'RUNTIME_SECRET', '2026-01-01', 'http://127.0.0.1:2')`,
    );
    await db.query(`INSERT INTO model_aliases (alias, release_id) VALUES ('shared', 'rel-1')`);
    const account = (await db.query(`INSERT INTO accounts (idp_issuer, idp_subject, max_active_batches) VALUES ('https://idp.test', 'user-1', 3) RETURNING id`)).rows[0].id;
    await db.query(`INSERT INTO api_keys (id, account_id, name, digest) VALUES ($1, $2, 'key', repeat('b', 64))`, ["a".repeat(26), account]);
    const finished = (
      await db.query(
        `INSERT INTO batches (account_id, idempotency_key, created_by_key, status, object_key, total_records, completed_records, finished_at, expires_at)
         VALUES ($1, 'done', 'key', 'completed', 'inputs/done', 1, 1, now(), now() + interval '7 days') RETURNING id`,
        [account],
      )
    ).rows[0].id;
    await db.query(`INSERT INTO batch_records (batch_id, line, custom_id, body, release_id, done) VALUES ($1, 1, 'a', '{}', 'rel-1', true)`, [finished]);
    await db.query(`INSERT INTO batch_results (batch_id, line, custom_id, result) VALUES ($1, 1, 'a', '{"z": 1, "a": 2}')`, [finished]);
    await db.query(
      `INSERT INTO usage_records (account_id, release_id, source, request_id, input_tokens, output_tokens) VALUES ($1, 'rel-1', 'bulk', 'batch_1', 12, 1), ($1, 'rel-1', 'bulk', $2, 13, 1)`,
      [account, `batch_${finished}_1`],
    );
    const leaseToken = crypto.randomUUID();
    const running = (
      await db.query(
        `INSERT INTO batches (account_id, idempotency_key, created_by_key, status, object_key, total_records, expires_at, lease_token, lease_expires_at, started_at)
         VALUES ($1, 'running', 'key', 'running', 'inputs/running', 2, now() + interval '7 days', $2, now() + interval '1 hour', now()) RETURNING id`,
        [account, leaseToken],
      )
    ).rows[0].id;
    await db.query(`INSERT INTO batch_records (batch_id, line, custom_id, body, release_id, attempts, not_before) VALUES ($1, 1, 'x', '{}', 'rel-1', 1, now()), ($1, 2, 'y', '{}', NULL, 0, NULL)`, [running]);
    return { runningBatch: running, leaseToken, finishedBatch: finished as string };
  });
}

describe("npm run db:migrate on a database of the unversioned schema (version 0)", () => {
  it("gives it exactly the catalog that schema.sql gives an empty database, and records every migration", async () => {
    const migrated = await versionZeroDatabase();
    expect(await migrate(migrated)).toEqual({ from: 0, to: LATEST.version });
    const fresh = await createDatabase();
    expect(await migrate(fresh)).toEqual({ from: null, to: LATEST.version });

    const [migratedCatalog, freshCatalog] = await Promise.all([catalog(migrated), catalog(fresh)]);
    expect(migratedCatalog.functions).toContainEqual(expect.objectContaining({ name: "bulk_commit_and_claim" }));
    expect(migratedCatalog).toEqual(freshCatalog);

    expect((await recorded(migrated)).map(({ version, name }) => ({ version, name }))).toEqual(MIGRATIONS.map(({ version, name }) => ({ version, name })));
    expect((await recorded(fresh)).map(({ version, name }) => ({ version, name }))).toEqual([{ version: LATEST.version, name: LATEST.name }]);
  });

  it("keeps its rows: batches, records, results, usage, the registry and accounts; the bulk functions go on with them", async () => {
    const url = await versionZeroDatabase();
    const { runningBatch, leaseToken, finishedBatch } = await addRows(url);
    const before = await rows(url);
    await migrate(url);
    // Columns that later migrations add read as null on the rows that were there (a release's modality: text, as every release was).
    const added: Record<string, Record<string, string | null>> = {
      model_releases: { task: null, head: null, training_id: null, modality: "text" },
      batches: { input_deleted_at: null, metadata: null, submitted_by_key: null },
      api_keys: { expires_at: null, scope: null, models: null },
    };
    const expected = Object.fromEntries(Object.entries(before).map(([table, list]) => [table, list.map((row) => ({ ...(row as object), ...added[table] }))]));
    // A batch record's usage row names its batch's key from then on (a request id that names no batch keeps none).
    for (const row of expected.usage_records as { request_id: string; key_id: string | null }[]) {
      if (row.request_id === `batch_${finishedBatch}_1`) row.key_id = "key";
    }
    expect(await rows(url)).toEqual(expected);

    await withClient(url, async (db) => {
      const commit = (line: number, token: string) =>
        db.query("SELECT bulk_commit($1, $2, $3, $4, '{}', NULL, 0, 0, NULL) AS outcome", [runningBatch, token, line, `line-${line}`]);
      expect((await commit(2, crypto.randomUUID())).rows[0].outcome).toBe("fenced");
      expect((await commit(2, leaseToken)).rows[0].outcome).toBe("committed");
      // A finished batch keeps its finished_at under the new constraint, and a terminal one cannot lose it.
      await expect(db.query("UPDATE batches SET finished_at = NULL WHERE status = 'completed'")).rejects.toMatchObject({
        code: "23514",
        constraint: "batches_finished_when_terminal",
      });
    });
  });
});

describe("the bulk functions of the latest version", () => {
  it("claim up to p_records records in line order and commit a claim's records together: fenced, each line once, one usage row per answer", async () => {
    const url = await createDatabase();
    await migrate(url);
    const { runningBatch: batch, leaseToken } = await addRows(url);
    await withClient(url, async (db) => {
      await db.query(`INSERT INTO batch_records (batch_id, line, custom_id, body, release_id) VALUES ($1, 3, 'z', '{}', 'rel-1'), ($1, 4, 'w', '{}', 'rel-1')`, [batch]);
      await db.query("UPDATE batches SET total_records = 4, submitted_by_key = 'submitter' WHERE id = $1", [batch]);
      const commit = (token: string, lines: number[], releases: (string | null)[]) =>
        db.query("SELECT bulk_commit_records($1, $2, $3::integer[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::integer[], $9::integer[]) AS outcome", [
          batch,
          token,
          lines,
          lines.map((line) => `c-${line}`),
          lines.map((line) => `{"line": ${line}}`),
          releases,
          lines.map((line) => 10 + line),
          lines.map(() => 1),
          lines.map(() => null),
        ]);
      const claim = async (records: number) => {
        const token = crypto.randomUUID();
        const claimed = await db.query("SELECT id, line, release_id FROM bulk_claim_records($1, 60000, ARRAY['rel-1'], 'http://127.0.0.1:2', $2)", [token, records]);
        return { token, lines: claimed.rows.map((row) => row.line as number) };
      };
      const state = async () =>
        (await db.query("SELECT status, completed_records, failed_records, lease_token, finished_at IS NOT NULL AS finished FROM batches WHERE id = $1", [batch])).rows[0];

      expect((await commit(crypto.randomUUID(), [1, 3], ["rel-1", null])).rows[0].outcome).toBe("fenced");
      expect((await db.query("SELECT count(*)::int AS n FROM batch_results WHERE batch_id = $1", [batch])).rows[0].n).toBe(0);
      // Line 1 answered, line 3 an error record: both in one commit, which releases the lease.
      expect((await commit(leaseToken, [1, 3], ["rel-1", null])).rows[0].outcome).toBe("committed");
      expect(await state()).toEqual({ status: "running", completed_records: 1, failed_records: 1, lease_token: null, finished: false });

      // The claim gives the pending records in line order, at most as many as asked.
      expect((await claim(1)).lines).toEqual([2]);
      await db.query("UPDATE batches SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1", [batch]);
      const second = await claim(10);
      expect(second.lines).toEqual([2, 4]);
      // Lines already done are skipped: nothing new is a duplicate, which releases the lease.
      expect((await commit(second.token, [3, 1], [null, "rel-1"])).rows[0].outcome).toBe("duplicate");
      const third = await claim(10);
      expect((await commit(third.token, [3, 4, 2], ["rel-1", "rel-1", null])).rows[0].outcome).toBe("committed");
      expect(await state()).toEqual({ status: "completed", completed_records: 2, failed_records: 2, lease_token: null, finished: true });

      const results = await db.query("SELECT line, custom_id, result::text AS result FROM batch_results WHERE batch_id = $1 ORDER BY line", [batch]);
      expect(results.rows).toEqual([1, 2, 3, 4].map((line) => ({ line, custom_id: `c-${line}`, result: `{"line": ${line}}` })));
      // Each usage row is the submitting key's.
      const usage = await db.query("SELECT request_id, input_tokens, key_id FROM usage_records WHERE request_id LIKE $1 ORDER BY request_id", [`batch_${batch}_%`]);
      expect(usage.rows).toEqual([
        { request_id: `batch_${batch}_1`, input_tokens: 11, key_id: "submitter" },
        { request_id: `batch_${batch}_4`, input_tokens: 14, key_id: "submitter" },
      ]);
    });
  });
});

describe("npm run db:migrate on a versioned database", () => {
  it("changes nothing when run again: same catalog, same record", async () => {
    const url = await createDatabase();
    await migrate(url);
    const [before, record] = [await catalog(url), await recorded(url)];
    expect(await migrate(url)).toEqual({ from: LATEST.version, to: LATEST.version });
    expect(await catalog(url)).toEqual(before);
    expect(await recorded(url)).toEqual(record);
  });

  it("lets concurrent runs on an empty database wait for each other: one builds it, the others find it done", async () => {
    const url = await createDatabase();
    const results = await Promise.all([migrate(url), migrate(url), migrate(url)]);
    expect(results.filter((r) => r.from === null)).toHaveLength(1);
    expect(results.filter((r) => r.from === LATEST.version)).toHaveLength(2);
    expect(await recorded(url)).toHaveLength(1);
  });

  it("refuses a database recorded at a version newer than the checkout's, changing nothing", async () => {
    const url = await createDatabase();
    await migrate(url);
    await withClient(url, (db) => db.query("INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')", [LATEST.version + 1]));
    const before = await catalog(url);
    await expect(migrate(url)).rejects.toThrow(/newer than this checkout/);
    expect(await catalog(url)).toEqual(before);
  });
});

describe("a migration that fails", () => {
  /** migrations/ and one more migration that changes the schema, then fails. */
  function migrationsWithAFailingOne(): string {
    const dir = mkdtempSync(join(tmpdir(), "migrations-"));
    for (const m of MIGRATIONS) copyFileSync(m.path, join(dir, basename(m.path)));
    writeFileSync(
      join(dir, `${String(LATEST.version + 1).padStart(4, "0")}_fails.sql`),
      "CREATE TABLE left_behind (id integer);\nALTER TABLE batches ADD COLUMN left_behind integer;\nSELECT 1 / 0;\n",
    );
    return dir;
  }

  it("leaves a version-0 database with data as it was, earlier migrations of the run included", async () => {
    const url = await versionZeroDatabase();
    await addRows(url);
    const [catalogBefore, rowsBefore] = [await catalog(url), await rows(url)];
    const dir = migrationsWithAFailingOne();
    try {
      await expect(migrate(url, { migrationsDir: dir })).rejects.toThrow(/division by zero/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await catalog(url)).toEqual(catalogBefore);
    expect(await rows(url)).toEqual(rowsBefore);
  });

  it("leaves an up-to-date database at its version", async () => {
    const url = await createDatabase();
    await migrate(url);
    const [catalogBefore, record] = [await catalog(url), await recorded(url)];
    const dir = migrationsWithAFailingOne();
    try {
      await expect(migrate(url, { migrationsDir: dir })).rejects.toThrow(/division by zero/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await catalog(url)).toEqual(catalogBefore);
    expect(await recorded(url)).toEqual(record);
  });
});

describe("migrations/", () => {
  it("runs 1, 2, 3... with no gap and nothing else in the folder", () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    const dir = mkdtempSync(join(tmpdir(), "migrations-"));
    try {
      writeFileSync(join(dir, "0001_first.sql"), "");
      writeFileSync(join(dir, "0003_third.sql"), "");
      expect(() => readMigrations(dir)).toThrow(/should be version 2/);
      rmSync(join(dir, "0003_third.sql"));
      writeFileSync(join(dir, "notes.txt"), "");
      expect(() => readMigrations(dir)).toThrow(/not a migration/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("batch_status_terminal", () => {
  it.each(BATCH_STATUSES)("agrees with the contract's TERMINAL_STATUSES for %s", async (status) => {
    const [row] = await query<{ terminal: boolean }>("SELECT batch_status_terminal($1) AS terminal", [status]);
    expect(row!.terminal).toBe(TERMINAL_STATUSES.includes(status));
  });
});

describe("training_status_terminal", () => {
  it.each(TRAINING_STATUSES)("agrees with the contract's TRAINING_TERMINAL_STATUSES for %s", async (status) => {
    const [row] = await query<{ terminal: boolean }>("SELECT training_status_terminal($1) AS terminal", [status]);
    expect(row!.terminal).toBe(TRAINING_TERMINAL_STATUSES.includes(status));
  });

  it("names in the trainings CHECK exactly the contract's statuses", async () => {
    const [row] = await query<{ definition: string }>(
      "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = 'trainings'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%status = ANY%'",
    );
    const named = [...row!.definition.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]);
    expect(named).toEqual([...TRAINING_STATUSES]);
  });
});
