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
 *
 * A statement made of pieces from several modules is composed with `sql`, which numbers the
 * parameters itself, so no piece depends on where another put its own:
 *
 *     const owned = sql`account_id = ${accountId}`;
 *     await db.query(...statement(sql`SELECT id FROM batches WHERE ${owned} AND status = ${status}`));
 */
import type { NeonQueryFunction, Pool } from "@neondatabase/serverless";
import { z } from "zod";

export type Row = Record<string, unknown>;

export interface Statement {
  text: string;
  params?: unknown[];
}

export interface Db {
  /** A statement's rows: its text and parameters, or a piece composed with `sql` (no parameters beside it). */
  query(text: string | Sql, params?: unknown[]): Promise<Row[]>;
  transaction(statements: (Statement | Sql)[]): Promise<Row[][]>;
}

/**
 * A piece of SQL with its values, not numbered yet: the text between the values, and the values, each
 * a parameter, a nested piece, or text of the code's own (`raw`).
 */
export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}
}

/** A piece of SQL: `${value}` is a parameter, `${sql`...`}` a piece inside it, `${raw(text)}` the code's own text. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  return new Sql([...strings], values);
}

/** Text of the code's own (a table's or a column's name, a constant list), written into the statement as it is: never input. */
export function raw(text: string): Sql {
  return new Sql([text], []);
}

/** Pieces one after another with `separator` (the code's own text) between them. */
export function joined(pieces: readonly Sql[], separator: string): Sql {
  if (pieces.length === 0) return raw("");
  return new Sql(["", ...Array<string>(pieces.length - 1).fill(separator), ""], pieces);
}

/** The statement's text with its parameters numbered $1, $2... in the order they appear, and the parameters. */
export function statement(piece: Sql): Statement {
  const params: unknown[] = [];
  const write = (p: Sql): string =>
    p.strings.reduce((text, part, i) => {
      if (i === 0) return part;
      const value = p.values[i - 1];
      if (value instanceof Sql) return text + write(value) + part;
      params.push(value);
      return `${text}$${params.length}${part}`;
    }, "");
  return { text: write(piece), params };
}

/** What a Db sends for a statement given as text and parameters, as a Statement, or as a piece to number (every Db's one reading of its arguments). */
export function sent(text: string | Sql | Statement, params: unknown[] = []): { text: string; params: unknown[] } {
  if (text instanceof Sql) {
    const numbered = statement(text);
    return { text: numbered.text, params: numbered.params ?? [] };
  }
  return typeof text === "string" ? { text, params } : { text: text.text, params: text.params ?? [] };
}

export function httpDb(sql: NeonQueryFunction<false, false>): Db {
  return {
    query: (text, params) => {
      const s = sent(text, params);
      return sql.query(s.text, s.params);
    },
    transaction: (statements) =>
      sql.transaction(
        statements.map((piece) => {
          const s = sent(piece);
          return sql.query(s.text, s.params);
        }),
      ),
  };
}

export function poolDb(pool: Pool): Db {
  return {
    query: async (text, params) => {
      const s = sent(text, params);
      return (await pool.query(s.text, s.params)).rows;
    },
    async transaction(statements) {
      const client = await pool.connect();
      // A connection whose rollback failed is in an unknown state: it is closed, not handed back.
      let broken = false;
      try {
        await client.query("BEGIN");
        const results: Row[][] = [];
        for (const piece of statements) {
          const { text, params } = sent(piece);
          results.push((await client.query(text, params)).rows);
        }
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
