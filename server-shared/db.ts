/**
 * One way to send SQL from either server tier: the edge's Neon HTTP driver (`neon()`, runs in
 * workerd) and the sidecar's Neon pool (runs under Bun) both become a `Db`, so the stores in
 * server-shared/jobs/ are written once for both.
 *
 *     const db = httpDb(neon(url));      // edge
 *     const db = poolDb(new Pool({...})); // sidecar
 *     const rows = await db.query("SELECT ... WHERE id = $1", [id]);
 *     const [, inserted, state] = await db.transaction([{ text, params }, ...]);
 *
 * A transaction is a list of statements sent together (what the HTTP driver can do): each sees
 * what the ones before it wrote, and all commit or none does.
 */
import type { NeonQueryFunction, Pool } from "@neondatabase/serverless";
import { z } from "zod";

export type Row = Record<string, unknown>;

export interface Statement {
  text: string;
  params?: unknown[];
}

export interface Db {
  query(text: string, params?: unknown[]): Promise<Row[]>;
  transaction(statements: Statement[]): Promise<Row[][]>;
}

export function httpDb(sql: NeonQueryFunction<false, false>): Db {
  return {
    query: (text, params = []) => sql.query(text, params),
    transaction: (statements) => sql.transaction(statements.map(({ text, params = [] }) => sql.query(text, params))),
  };
}

export function poolDb(pool: Pool): Db {
  return {
    query: async (text, params = []) => (await pool.query(text, params)).rows,
    async transaction(statements) {
      const client = await pool.connect();
      // A connection whose rollback failed is in an unknown state: it is closed, not handed back.
      let broken = false;
      try {
        await client.query("BEGIN");
        const results: Row[][] = [];
        for (const { text, params = [] } of statements) results.push((await client.query(text, params)).rows);
        await client.query("COMMIT");
        return results;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => (broken = true));
        throw err;
      } finally {
        client.release(broken);
      }
    },
  };
}

/**
 * Column parsers for the row schemas of either driver: a timestamp comes back as a Date (or as text
 * inside JSON), a bigint or count(*) as text.
 */
export const Column = {
  /** A timestamp as an ISO 8601 string in UTC. */
  time: z.union([z.string(), z.date()]).transform((value) => new Date(value).toISOString()),
  int: z.coerce.number().int(),
};
