/**
 * A local stand-in for Neon's proxy (runs on a developer machine or in tests, never in production),
 * so that the production driver `@neondatabase/serverless` runs unchanged against a real Postgres.
 * One HTTP server on 127.0.0.1 speaks both of the driver's protocols:
 *
 * - `GET /v2` upgraded to a WebSocket (what `Pool` and `Client` use): each binary message is
 *   written to a TCP connection to the Postgres of `databaseUrl`, and what Postgres sends comes
 *   back as binary messages. The driver's `?address=host:port` is ignored, so a client cannot reach
 *   any other host; Postgres itself checks the user and password.
 * - `POST /sql` (what the HTTP `neon()` function uses): `{query, params}` or, for `transaction()`,
 *   `{queries: [...]}`, run with pg on the database, user and password of the
 *   `Neon-Connection-String` header (at the host and port of `databaseUrl`), answered in Neon's
 *   JSON format: raw text values that the driver parses itself, and HTTP 400 with Postgres' error
 *   fields so that the driver throws a `NeonDbError` carrying `code`.
 *
 * Clients need only `NEON_LOCAL_BRIDGE=127.0.0.1:<port>` and `DATABASE_URL=<connectionString>`;
 * server-shared/neon-route.ts derives the `neonConfig` settings from them.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import pg from "pg";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { readBody, sendJson } from "./http.ts";

export interface NeonBridge {
  port: number;
  /** `neonConfig.wsProxy`: the driver appends `?address=host:port`. */
  wsProxy: string;
  /** `neonConfig.fetchEndpoint` for `neon()`. */
  fetchEndpoint: string;
  /** The URL clients connect with (DATABASE_URL): the real user, password and database. */
  connectionString: string;
  stop(): Promise<void>;
}

export interface NeonBridgeOptions {
  databaseUrl: string;
  /** Defaults to a port the system picks. */
  port?: number;
}

export async function startNeonBridge(opts: NeonBridgeOptions): Promise<NeonBridge> {
  const target = new URL(opts.databaseUrl);
  const pgHost = target.hostname;
  const pgPort = Number(target.port || 5432);
  const pools = new SqlPools(opts.databaseUrl);
  const tunnels = new Set<Socket>();

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://bridge").pathname;
    if (req.method === "POST" && path === "/sql") void handleSql(req, res, pools);
    else sendJson(res, 404, { message: `the local Neon bridge serves POST /sql and WebSocket /v2, not ${req.method} ${path}` });
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    if (new URL(req.url ?? "/", "http://bridge").pathname !== "/v2") {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => tunnel(ws, connect({ host: pgHost, port: pgPort }), tunnels));
  });
  await new Promise<void>((listening, failed) => {
    server.once("error", failed);
    server.listen(opts.port ?? 0, "127.0.0.1", () => listening());
  });
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("neon bridge: no port");
  const port = address.port;

  return {
    port,
    wsProxy: `127.0.0.1:${port}/v2`,
    fetchEndpoint: `http://127.0.0.1:${port}/sql`,
    connectionString: opts.databaseUrl,
    async stop() {
      for (const ws of wss.clients) ws.terminate();
      for (const socket of tunnels) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((closed) => server.close(() => closed()));
      await pools.end();
    },
  };
}

/** Pipes one WebSocket to one TCP connection to Postgres; either side closing closes both. */
function tunnel(ws: WebSocket, tcp: Socket, tunnels: Set<Socket>): void {
  tunnels.add(tcp);
  tcp.setNoDelay(true);
  ws.on("message", (data: RawData) => tcp.write(toBuffer(data)));
  tcp.on("data", (chunk) => ws.send(chunk, { binary: true }));
  ws.on("close", () => tcp.end());
  ws.on("error", () => tcp.destroy());
  tcp.on("error", () => ws.terminate());
  tcp.on("close", () => {
    tunnels.delete(tcp);
    ws.close();
  });
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
}

/** One small pg Pool per user, password and database, all at the Postgres of the bridge. */
class SqlPools {
  private readonly pools = new Map<string, pg.Pool>();
  constructor(private readonly databaseUrl: string) {}

  /** The pool for the credentials in a `Neon-Connection-String` header. */
  for(header: string): pg.Pool {
    if (!URL.canParse(header)) throw new BadRequest("Neon-Connection-String is not a URL");
    const from = new URL(header);
    const key = [from.username, from.password, from.pathname].join("\0");
    let pool = this.pools.get(key);
    if (!pool) {
      const url = new URL(this.databaseUrl);
      url.username = from.username;
      url.password = from.password;
      url.pathname = from.pathname;
      pool = new pg.Pool({ connectionString: url.toString(), max: 4, idleTimeoutMillis: 30_000 });
      // An idle connection that Postgres drops (a restart) must not crash the process.
      pool.on("error", () => {});
      this.pools.set(key, pool);
    }
    return pool;
  }

  async end(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.end()));
    this.pools.clear();
  }
}

interface SqlQuery {
  query: string;
  params?: unknown[];
}

/** Every value comes back as Postgres' text, which the driver parses with its own type parsers. */
const RAW_TEXT: pg.CustomTypesConfig = { getTypeParser: (() => (value: string) => value) as pg.CustomTypesConfig["getTypeParser"] };

const ISOLATION: Record<string, string> = {
  ReadUncommitted: "READ UNCOMMITTED",
  ReadCommitted: "READ COMMITTED",
  RepeatableRead: "REPEATABLE READ",
  Serializable: "SERIALIZABLE",
};

/** A request the bridge cannot run (answered 400, like Neon's proxy). */
class BadRequest extends Error {}

async function handleSql(req: IncomingMessage, res: ServerResponse, pools: SqlPools): Promise<void> {
  try {
    const connectionString = header(req, "neon-connection-string");
    if (!connectionString) throw new BadRequest("missing Neon-Connection-String header");
    const body = parseBody(await readBody(req));
    const arrayMode = header(req, "neon-array-mode") === "true";
    const pool = pools.for(connectionString);
    if ("queries" in body) {
      const results = await transaction(pool, body.queries, begin(req), arrayMode);
      return sendJson(res, 200, { results });
    }
    sendJson(res, 200, await runQuery(pool, body, arrayMode));
  } catch (err) {
    if (err instanceof pg.DatabaseError) return sendJson(res, 400, databaseErrorBody(err));
    sendJson(res, err instanceof BadRequest ? 400 : 500, { message: err instanceof Error ? err.message : String(err) });
  }
}

function parseBody(text: string): SqlQuery | { queries: SqlQuery[] } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BadRequest("request body is not JSON");
  }
  const isQuery = (q: unknown): q is SqlQuery =>
    typeof q === "object" && q !== null && typeof (q as SqlQuery).query === "string" && (!("params" in q) || Array.isArray(q.params));
  if (isQuery(body)) return body;
  const queries = (body as { queries?: unknown } | null)?.queries;
  if (Array.isArray(queries) && queries.every(isQuery)) return { queries };
  throw new BadRequest("body must be {query, params} or {queries: [{query, params}, ...]}");
}

/** The BEGIN statement for the `Neon-Batch-*` headers that `transaction()` sends. */
function begin(req: IncomingMessage): string {
  const modes: string[] = [];
  const isolation = header(req, "neon-batch-isolation-level");
  if (isolation) {
    const level = ISOLATION[isolation];
    if (!level) throw new BadRequest(`unknown Neon-Batch-Isolation-Level ${isolation}`);
    modes.push(`ISOLATION LEVEL ${level}`);
  }
  const readOnly = header(req, "neon-batch-read-only");
  if (readOnly) modes.push(readOnly === "true" ? "READ ONLY" : "READ WRITE");
  const deferrable = header(req, "neon-batch-deferrable");
  if (deferrable) modes.push(deferrable === "true" ? "DEFERRABLE" : "NOT DEFERRABLE");
  return ["BEGIN", modes.join(", ")].join(" ").trim();
}

async function transaction(pool: pg.Pool, queries: SqlQuery[], beginSql: string, arrayMode: boolean) {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query(beginSql);
    const results = [];
    for (const query of queries) results.push(await runQuery(client, query, arrayMode));
    await client.query("COMMIT");
    return results;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => (broken = true));
    throw err;
  } finally {
    client.release(broken);
  }
}

/** Runs one statement the way Neon does: extended protocol, so one statement per query. */
async function runQuery(db: pg.Pool | pg.PoolClient, { query, params }: SqlQuery, arrayMode: boolean) {
  const config: pg.QueryArrayConfig & { queryMode: "extended" } = {
    text: query,
    values: params ?? [],
    rowMode: "array",
    types: RAW_TEXT,
    queryMode: "extended",
  };
  const result = await db.query(config);
  const names = result.fields.map((field) => field.name);
  const rows = arrayMode ? result.rows : result.rows.map((row) => Object.fromEntries(row.map((value, i) => [names[i], value])));
  return { command: result.command, rowCount: result.rowCount, fields: result.fields, rows, rowAsArray: arrayMode };
}

/** The fields that the driver copies from an error body onto its NeonDbError. */
function databaseErrorBody(err: pg.DatabaseError) {
  const { message, severity, code, detail, hint, position, internalPosition, internalQuery, where } = err;
  const { schema, table, column, dataType, constraint, file, line, routine } = err;
  return { message, severity, code, detail, hint, position, internalPosition, internalQuery, where, schema, table, column, dataType, constraint, file, line, routine };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

