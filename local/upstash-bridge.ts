/**
 * A local stand-in for Upstash's REST API (runs on a developer machine or in tests, never in
 * production), so that the production driver `@upstash/redis` runs unchanged against a real Redis.
 *
 *   POST /            ["SET", "k", "v"]                    → {result} or 400 {error}
 *   POST /pipeline    [["SET", "k", "v"], ["GET", "k"]]    → [{result} | {error}, ...]
 *   POST /multi-exec  the same, run in MULTI/EXEC           → [{result} | {error}, ...]
 *
 * Every request needs `Authorization: Bearer <token>`. Replies go back in Upstash's encoding:
 * with `Upstash-Encoding: base64` (the driver's default) strings are base64 of their bytes, except
 * the status "OK"; integers are numbers, nil is null, arrays nest. Commands reach Redis as given,
 * with binary-safe (Buffer) replies.
 *
 * @example
 *   const rest = await startUpstashBridge({ redisUrl, token });
 *   const redis = new Redis({ url: rest.url, token: rest.token }); // from "@upstash/redis"
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Redis, ReplyError, type ChainableCommander } from "ioredis";
import { secretsEqual } from "../server-shared/crypto.ts";
import { readBody, sendJson } from "./http.ts";

export interface UpstashBridge {
  /** UPSTASH_REDIS_REST_URL */
  url: string;
  /** UPSTASH_REDIS_REST_TOKEN */
  token: string;
  stop(): Promise<void>;
}

export interface UpstashBridgeOptions {
  redisUrl: string;
  token: string;
  /** Defaults to a port the system picks. */
  port?: number;
}

type Command = [string, ...string[]];
type Reply = { result: unknown } | { error: string };

/** Commands that would take over the one shared connection; Upstash serves them elsewhere. */
const UNSUPPORTED = new Set(["subscribe", "psubscribe", "ssubscribe", "monitor", "quit", "select"]);

export async function startUpstashBridge(opts: UpstashBridgeOptions): Promise<UpstashBridge> {
  const redis = new Redis(opts.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  redis.on("error", () => {}); // a lost connection fails the requests in flight; ioredis reconnects
  await redis.connect();
  const scripts = new ScriptFlags();

  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => sendJson(res, 500, { error: err instanceof Error ? err.message : String(err) }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!(await secretsEqual(req.headers.authorization ?? "", `Bearer ${opts.token}`))) {
      return sendJson(res, 401, { error: "Unauthorized: missing or wrong bearer token" });
    }
    const path = new URL(req.url ?? "/", "http://bridge").pathname;
    if (req.method !== "POST" || !["/", "/pipeline", "/multi-exec"].includes(path)) {
      return sendJson(res, 404, { error: `the local Upstash bridge serves POST /, /pipeline and /multi-exec, not ${req.method} ${path}` });
    }
    const commands = parseBody(await readBody(req), path !== "/");
    if (typeof commands === "string") return sendJson(res, 400, { error: commands });
    const base64 = req.headers["upstash-encoding"] === "base64";
    if (path === "/") {
      const reply = await runOne(redis, scripts, commands[0] as Command, base64);
      return sendJson(res, "error" in reply ? 400 : 200, reply);
    }
    const replies = await runBatch(path === "/pipeline" ? redis.pipeline() : redis.multi(), scripts, commands, base64);
    sendJson(res, "error" in replies ? 400 : 200, replies);
  }

  await new Promise<void>((listening, failed) => {
    server.once("error", failed);
    server.listen(opts.port ?? 0, "127.0.0.1", () => listening());
  });
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("upstash bridge: no port");

  return {
    url: `http://127.0.0.1:${address.port}`,
    token: opts.token,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((closed) => server.close(() => closed()));
      redis.disconnect();
    },
  };
}

async function runOne(redis: Redis, scripts: ScriptFlags, command: Command, base64: boolean): Promise<Reply> {
  try {
    const value = await redis.callBuffer(...scripts.toRedis(command));
    return { result: encode(scripts.fromRedis(command, value), base64) };
  } catch (err) {
    if (isReplyError(err)) return { error: err.message };
    throw err;
  }
}

/** A pipeline or MULTI/EXEC: one reply per command, or one error when Redis discards the transaction. */
async function runBatch(batch: ChainableCommander, scripts: ScriptFlags, commands: Command[], base64: boolean): Promise<Reply[] | { error: string }> {
  for (const command of commands) batch.callBuffer(...scripts.toRedis(command));
  let replies: [Error | null, unknown][] | null;
  try {
    replies = await batch.exec();
  } catch (err) {
    if (isReplyError(err)) return { error: err.message }; // EXECABORT: a command was refused while queueing
    throw err;
  }
  return (replies ?? []).map(([err, value], i): Reply =>
    err ? { error: err.message } : { result: encode(scripts.fromRedis(commands[i] as Command, value), base64) },
  );
}

/** An error reply from Redis (a command error), as opposed to a lost connection. */
function isReplyError(err: unknown): err is Error {
  return err instanceof (ReplyError as ErrorConstructor);
}

/** Commands as arrays of strings: a single command for `/`, a list for the batch paths; a string is the reason it is not. */
function parseBody(text: string, batch: boolean): Command[] | string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return "request body is not JSON";
  }
  const commands = batch ? body : [body];
  if (!Array.isArray(commands) || commands.length === 0) return "expected a JSON array of commands";
  const parsed: Command[] = [];
  for (const command of commands) {
    if (!Array.isArray(command) || command.length === 0) return "a command must be a non-empty JSON array";
    const args = command.map((arg: unknown) => (typeof arg === "string" ? arg : JSON.stringify(arg)));
    const name = args[0]!.toLowerCase();
    if (UNSUPPORTED.has(name)) return `ERR ${name} is not supported by the local Upstash bridge`;
    parsed.push([name, ...args.slice(1)]);
  }
  return parsed;
}

/** Redis' reply in Upstash's JSON; see `decode` in @upstash/redis' http client. */
function encode(value: unknown, base64: boolean): unknown {
  if (Buffer.isBuffer(value)) {
    if (!base64) return value.toString("utf8");
    // The driver passes "OK" through undecoded; every other string must be base64.
    return value.length === 2 && value.toString("latin1") === "OK" ? "OK" : value.toString("base64");
  }
  if (typeof value === "string") return encode(Buffer.from(value), base64);
  if (Array.isArray(value)) return value.map((item) => encode(item, base64));
  if (value instanceof Error) return encode(Buffer.from(value.message), base64);
  return value ?? null;
}

/**
 * Scripts whose `#!lua flags=` line names flags that only Upstash knows (@upstash/ratelimit sends
 * `allow-key-locking`) are sent to Redis without them. The driver computes SHA-1s of the scripts
 * it sent, so EVALSHA, SCRIPT EXISTS and SCRIPT LOAD's reply are mapped between the two hashes.
 */
class ScriptFlags {
  private static readonly REDIS_FLAGS = new Set(["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"]);
  /** SHA-1 of the script as sent → SHA-1 of the script Redis stores. */
  private readonly aliases = new Map<string, string>();
  private readonly originals = new Map<string, string>();

  toRedis(command: Command): Command {
    const [name, ...args] = command;
    const sub = args[0]?.toLowerCase();
    if ((name === "eval" || name === "eval_ro") && args[0] !== undefined) return [name, this.strip(args[0]), ...args.slice(1)];
    if (name === "script" && sub === "load" && args[1] !== undefined) return [name, "load", this.strip(args[1])];
    if ((name === "evalsha" || name === "evalsha_ro") && args[0] !== undefined) return [name, this.alias(args[0]), ...args.slice(1)];
    if (name === "script" && sub === "exists") return [name, "exists", ...args.slice(1).map((sha) => this.alias(sha))];
    return command;
  }

  fromRedis(command: Command, reply: unknown): unknown {
    const [name, sub] = command;
    if (name === "script" && sub?.toLowerCase() === "load" && Buffer.isBuffer(reply)) {
      const original = this.originals.get(reply.toString("latin1"));
      if (original) return Buffer.from(original);
    }
    return reply;
  }

  private alias(sha: string): string {
    return this.aliases.get(sha.toLowerCase()) ?? sha;
  }

  private strip(script: string): string {
    const shebang = /^#!lua flags=([^\n]*)\n/.exec(script);
    if (!shebang) return script;
    const flags = (shebang[1] ?? "").split(",").map((flag) => flag.trim());
    const known = flags.filter((flag) => ScriptFlags.REDIS_FLAGS.has(flag));
    if (known.length === flags.length) return script;
    const stripped = `#!lua${known.length ? ` flags=${known.join(",")}` : ""}\n${script.slice(shebang[0].length)}`;
    const [from, to] = [sha1(script), sha1(stripped)];
    this.aliases.set(from, to);
    this.originals.set(to, from);
    return stripped;
  }
}

function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}


