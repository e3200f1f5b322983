/**
 * The local data services (local/postgres.ts, local/redis.ts) and the two bridges
 * (local/neon-bridge.ts, local/upstash-bridge.ts), driven through the production drivers,
 * unchanged: `@neondatabase/serverless` (WebSocket Pool and HTTP neon()) and `@upstash/redis`,
 * against a real embedded Postgres and a real private redis-server.
 */
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, neon, NeonDbError, Pool } from "@neondatabase/serverless";
import { Redis } from "@upstash/redis";
import ws from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { startNeonBridge, type NeonBridge } from "../local/neon-bridge.ts";
import { clusterDir, startPostgres, type LocalPostgres } from "../local/postgres.ts";
import { startRedis, type LocalRedis } from "../local/redis.ts";
import { startUpstashBridge, type UpstashBridge } from "../local/upstash-bridge.ts";

function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

const savedEnv = { DATABASE_URL: process.env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL };
let dir: string;
let postgres: LocalPostgres;
let redisServer: LocalRedis;
let neonBridge: NeonBridge;
let upstash: UpstashBridge;

beforeAll(async () => {
  // These tests are about the private servers, whatever the developer's shell has set.
  delete process.env.DATABASE_URL;
  delete process.env.REDIS_URL;
  dir = mkdtempSync(join(tmpdir(), "bridges-test-"));
  chmodSync(dir, 0o711); // as root, Postgres runs as user postgres, which must enter it
  // One at a time, so that afterAll can stop whatever started before a failure.
  postgres = await startPostgres({ dataDir: join(dir, "postgres") });
  redisServer = await startRedis({ dataDir: join(dir, "redis") });
  neonBridge = await startNeonBridge({ databaseUrl: postgres.url });
  upstash = await startUpstashBridge({ redisUrl: redisServer.url, token: randomBytes(16).toString("hex") });
  useNeonRoute(neonRoute(neonBridge.connectionString, `127.0.0.1:${neonBridge.port}`), ws);
});

afterAll(async () => {
  await neonBridge?.stop();
  await upstash?.stop();
  await postgres?.stop();
  await redisServer?.stop();
  Object.assign(process.env, savedEnv);
  for (const [name, value] of Object.entries(savedEnv)) if (value === undefined) delete process.env[name];
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("startPostgres and startRedis", () => {
  it("start private servers on loopback with secrets kept out of sight", () => {
    expect(postgres.embedded).toBe(true);
    expect(postgres.url).toMatch(/^postgres:\/\/postgres:[0-9a-f]{48}@127\.0\.0\.1:\d+\/svc$/);
    expect(statSync(join(dir, "postgres", "password")).mode & 0o777).toBe(0o600);
    expect(redisServer.private).toBe(true);
    expect(redisServer.url).toMatch(/^redis:\/\/:[0-9a-f]{48}@127\.0\.0\.1:\d+$/);
    expect(statSync(join(dir, "redis", "redis.conf")).mode & 0o777).toBe(0o600);
  });

  it("use DATABASE_URL and REDIS_URL as given when they are set", async () => {
    process.env.DATABASE_URL = "postgres://someone@db.example/app";
    process.env.REDIS_URL = "redis://cache.example:6379";
    try {
      const db = await startPostgres({ dataDir: join(dir, "unused") });
      const cache = await startRedis({ dataDir: join(dir, "unused") });
      expect(db).toMatchObject({ url: "postgres://someone@db.example/app", embedded: false });
      expect(cache).toMatchObject({ url: "redis://cache.example:6379", private: false });
      await db.stop();
      await cache.stop();
    } finally {
      delete process.env.DATABASE_URL;
      delete process.env.REDIS_URL;
    }
  });
});

describe("neon Pool over the WebSocket bridge", () => {
  it("connects and runs a parameterised query", async () => {
    const pool = new Pool({ connectionString: neonBridge.connectionString });
    try {
      const { rows } = await pool.query("SELECT $1::int + 1 AS n, current_database() AS db", [41]);
      expect(rows).toEqual([{ n: 42, db: "svc" }]);
    } finally {
      await pool.end();
    }
  });

  it("rolls a transaction back", async () => {
    const pool = new Pool({ connectionString: neonBridge.connectionString });
    const client = await pool.connect();
    try {
      await client.query("CREATE TABLE IF NOT EXISTS ws_items (name text PRIMARY KEY)");
      await client.query("BEGIN");
      await client.query("INSERT INTO ws_items VALUES ($1)", ["draft"]);
      expect((await client.query("SELECT count(*)::int AS c FROM ws_items")).rows).toEqual([{ c: 1 }]);
      await client.query("ROLLBACK");
      expect((await client.query("SELECT count(*)::int AS c FROM ws_items")).rows).toEqual([{ c: 0 }]);
    } finally {
      client.release();
      await pool.end();
    }
  });

  it("surfaces a syntax error with its Postgres code", async () => {
    const pool = new Pool({ connectionString: neonBridge.connectionString });
    try {
      await expect(pool.query("SELEC 1")).rejects.toMatchObject({ code: "42601", message: expect.stringContaining("syntax error") });
    } finally {
      await pool.end();
    }
  });

  it("sends a query's messages as it is made, not after a timer (each query would wait a clamped millisecond)", async () => {
    // Whether a timer due at once had fired when each message of the query left.
    let timerFired = false;
    const sent: boolean[] = [];
    class RecordingWebSocket extends ws {
      constructor(...args: ConstructorParameters<typeof ws>) {
        super(...args);
        const send = this.send.bind(this) as (...message: unknown[]) => void;
        this.send = ((...message: unknown[]) => {
          sent.push(timerFired);
          send(...message);
        }) as ws["send"];
      }
    }
    const client = new Client({ connectionString: neonBridge.connectionString });
    client.neonConfig.webSocketConstructor = RecordingWebSocket;
    await client.connect();
    try {
      sent.length = 0;
      setTimeout(() => (timerFired = true), 0);
      const { rows } = await client.query("SELECT $1::int AS n", [7]);
      expect(rows).toEqual([{ n: 7 }]);
      expect(sent.length).toBeGreaterThan(0);
      expect(sent).not.toContain(true);
    } finally {
      await client.end();
    }
  });

  it("leaves authentication to Postgres: a wrong password is refused", async () => {
    const wrong = new URL(neonBridge.connectionString);
    wrong.password = "not-the-password";
    const pool = new Pool({ connectionString: wrong.toString() });
    pool.on("error", () => {});
    try {
      await expect(pool.query("SELECT 1")).rejects.toMatchObject({ code: "28P01" });
    } finally {
      await pool.end();
    }
  });
});

describe("neon() over the HTTP bridge", () => {
  const sql = () => neon(neonBridge.connectionString);

  it("returns typed values parsed by the driver", async () => {
    const at = new Date("2026-03-04T05:06:07.089Z");
    const rows = await sql()`SELECT ${7}::int AS i, ${"héllo ✓"}::text AS t, ${{ a: [1, "b"] }}::jsonb AS j,
      ${at}::timestamptz AS ts, ${true}::bool AS b, NULL::int AS n, 9007199254740993::bigint AS big`;
    expect(rows).toEqual([{ i: 7, t: "héllo ✓", j: { a: [1, "b"] }, ts: at, b: true, n: null, big: "9007199254740993" }]);
  });

  it("gives full results with field metadata on request", async () => {
    const result = await sql().query("SELECT 1 AS one", [], { fullResults: true });
    expect(result).toMatchObject({ command: "SELECT", rowCount: 1, rows: [{ one: 1 }] });
    expect(result.fields[0]).toMatchObject({ name: "one", dataTypeID: 23 });
  });

  it("runs a transaction and commits it", async () => {
    const db = sql();
    await db`CREATE TABLE IF NOT EXISTS http_items (name text PRIMARY KEY)`;
    const [inserted, counted] = await db.transaction(
      [db`INSERT INTO http_items VALUES (${"one"}), (${"two"}) RETURNING name`, db`SELECT count(*)::int AS c FROM http_items`],
      { isolationLevel: "Serializable" },
    );
    expect(inserted).toEqual([{ name: "one" }, { name: "two" }]);
    expect(counted).toEqual([{ c: 2 }]);
  });

  it("rolls a failing transaction back and reports a unique violation with code 23505", async () => {
    const db = sql();
    const failing = db.transaction([db`INSERT INTO http_items VALUES (${"three"})`, db`INSERT INTO http_items VALUES (${"one"})`]);
    await expect(failing).rejects.toBeInstanceOf(NeonDbError);
    await expect(failing).rejects.toMatchObject({ code: "23505", constraint: "http_items_pkey", table: "http_items" });
    expect(await db`SELECT name FROM http_items ORDER BY name`).toEqual([{ name: "one" }, { name: "two" }]);
  });

  it("honours a read-only transaction", async () => {
    const db = sql();
    const write = db.transaction([db`INSERT INTO http_items VALUES (${"four"})`], { readOnly: true });
    await expect(write).rejects.toMatchObject({ code: "25006" });
  });

  it("runs one statement per query, as Neon does", async () => {
    await expect(sql().query("SELECT 1; SELECT 2")).rejects.toMatchObject({ code: "42601" });
  });

  it("leaves authentication to Postgres: a wrong password is refused", async () => {
    const wrong = new URL(neonBridge.connectionString);
    wrong.password = "not-the-password";
    await expect(neon(wrong.toString())`SELECT 1`).rejects.toMatchObject({ code: "28P01" });
  });
});

describe("@upstash/redis over the REST bridge", () => {
  const redis = () => new Redis({ url: upstash.url, token: upstash.token, enableTelemetry: false });

  it("sets and gets a string and a JSON object", async () => {
    await redis().set("greeting", "héllo ✓ 🙂");
    expect(await redis().get("greeting")).toBe("héllo ✓ 🙂");
    await redis().set("profile", { name: "Ada", tags: ["x", "y"], n: 3 });
    expect(await redis().get("profile")).toEqual({ name: "Ada", tags: ["x", "y"], n: 3 });
    expect(await redis().get("missing")).toBeNull();
  });

  it("increments, expires and reports a command error", async () => {
    expect(await redis().incr("counter")).toBe(1);
    expect(await redis().incrby("counter", 41)).toBe(42);
    await redis().set("temp", "x");
    expect(await redis().expire("temp", 100)).toBe(1);
    const ttl = await redis().ttl("temp");
    expect(ttl).toBeGreaterThan(90);
    expect(ttl).toBeLessThanOrEqual(100);
    await expect(redis().incr("greeting")).rejects.toThrow(/ERR value is not an integer/);
  });

  it("runs a pipeline, keeping a failed command's error beside the others' results", async () => {
    const pipeline = redis().pipeline();
    pipeline.set("p", 1).incr("p").get("p").lpush("list", "a", "b").lrange("list", 0, -1).incr("greeting");
    const replies = await pipeline.exec({ keepErrors: true });
    expect(replies.map((reply) => reply.result ?? reply.error)).toEqual([
      "OK",
      2,
      2,
      2,
      ["b", "a"],
      expect.stringContaining("not an integer"),
    ]);
  });

  it("runs a MULTI/EXEC transaction", async () => {
    const replies = await redis().multi().set("m", "v").incr("m-count").incr("m-count").get("m").exec();
    expect(replies).toEqual(["OK", 1, 2, "v"]);
  });

  it("evaluates a Lua script returning integers, strings and nested arrays", async () => {
    const result = await redis().eval("return {1, 'two', {3, 'four'}, ARGV[1], #KEYS}", ["k1", "k2"], ["arg"]);
    expect(result).toEqual([1, "two", [3, "four"], "arg", 2]);
  });

  it("falls back from EVALSHA to EVAL for an unknown script, then finds it by hash", async () => {
    const client = redis();
    const source = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    await expect(client.evalsha(sha1(source), ["quota"], [5])).rejects.toThrow(/NOSCRIPT/);
    expect(await client.createScript<number>(source).exec(["quota"], ["5"])).toBe(5);
    expect(await client.evalsha(sha1(source), ["quota"], [5])).toBe(10);
  });

  it("accepts a script whose shebang names flags only Upstash knows, under the hash of the script sent", async () => {
    const client = redis();
    const source = "#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])";
    expect(await client.createScript<number>(source).exec(["locked"], [])).toBe(1);
    expect(await client.scriptExists(sha1(source))).toEqual([1]);
    expect(await client.scriptLoad(source)).toBe(sha1(source));
    expect(await client.evalsha(sha1(source), ["locked"], [])).toBe(2);
  });

  it("speaks Upstash's wire format: base64 strings except OK, numbers, nulls, nested arrays", async () => {
    const post = async (path: string, body: unknown, encoding = true) => {
      const headers: Record<string, string> = { authorization: `Bearer ${upstash.token}` };
      if (encoding) headers["upstash-encoding"] = "base64";
      const res = await fetch(`${upstash.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as unknown };
    };
    const b64 = (text: string) => Buffer.from(text).toString("base64");
    expect(await post("/", ["SET", "wire", "é"])).toEqual({ status: 200, body: { result: "OK" } });
    expect(await post("/", ["GET", "wire"])).toEqual({ status: 200, body: { result: b64("é") } });
    expect(await post("/", ["GET", "wire"], false)).toEqual({ status: 200, body: { result: "é" } });
    expect(await post("/", ["PING"])).toEqual({ status: 200, body: { result: b64("PONG") } });
    expect(await post("/", ["EVAL", "return {1, 'a', {false, 'b'}}", 0])).toEqual({ status: 200, body: { result: [1, b64("a"), [null, b64("b")]] } });
    expect(await post("/", ["NOSUCHCMD"])).toMatchObject({ status: 400, body: { error: expect.stringContaining("unknown command") } });
    expect(await post("/multi-exec", [["SET", "wire", "x"], ["INCR", "wire"]])).toEqual({
      status: 200,
      body: [{ result: "OK" }, { error: "ERR value is not an integer or out of range" }],
    });
    expect(await post("/multi-exec", [["SET", "wire", "y"], ["NOSUCHCMD"]])).toMatchObject({ status: 400, body: { error: expect.stringContaining("EXECABORT") } });
    expect(await post("/", ["GET", "wire"], false)).toEqual({ status: 200, body: { result: "x" } });
  });

  it("refuses a wrong or missing token with 401", async () => {
    const wrong = new Redis({ url: upstash.url, token: "wrong-token", enableTelemetry: false });
    await expect(wrong.get("greeting")).rejects.toThrow(/Unauthorized/);
    const res = await fetch(upstash.url, { method: "POST", body: JSON.stringify(["GET", "greeting"]) });
    expect(res.status).toBe(401);
  });
});

describe("private redis-server lifecycle", () => {
  it("replaces a server of the same dataDir left running by an earlier launcher", async () => {
    const leftover = redisServer;
    const leftoverPid = Number(readFileSync(join(dir, "redis", "redis.pid"), "utf8"));
    redisServer = await startRedis({ dataDir: join(dir, "redis") });
    expect(redisServer.url).not.toBe(leftover.url);
    expect(() => process.kill(leftoverPid, 0)).toThrow();
    await leftover.stop(); // stopped by the second start already
  });
});

describe("embedded Postgres lifecycle", () => {
  const dataDir = () => join(dir, "postgres");
  const port = () => Number(new URL(postgres.url).port);
  const names = () => neon(neonBridge.connectionString)`SELECT name FROM http_items ORDER BY name`;

  it("keeps data across a stop and a start on the same dataDir", async () => {
    await postgres.stop();
    postgres = await startPostgres({ dataDir: dataDir(), port: port() });
    expect(await names()).toEqual([{ name: "one" }, { name: "two" }]);
  });

  it("starts again after the postmaster was killed with SIGKILL", async () => {
    const pid = Number(readFileSync(join(clusterDir(dataDir()), "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, "SIGKILL");
    await postgres.stop(); // already gone: resolves at once
    postgres = await startPostgres({ dataDir: dataDir(), port: port() });
    expect(await names()).toEqual([{ name: "one" }, { name: "two" }]);
  });

  it("replaces a server of the same dataDir left running by an earlier launcher", async () => {
    const leftover = postgres;
    postgres = await startPostgres({ dataDir: dataDir(), port: port() });
    expect(await names()).toEqual([{ name: "one" }, { name: "two" }]);
    await leftover.stop(); // stopped by the second start already
  });
});
