/**
 * Redis for the local stack (runs on a developer machine or in tests, never in production).
 *
 * With REDIS_URL set, that server is used as is. Otherwise a private `redis-server` runs on a free
 * loopback port with a random password and no persistence; its config and log live in `dataDir`.
 * The password goes in a 0600 config file rather than on the command line, where `ps` would show
 * it to every local user. One stack per dataDir: a server that an earlier launcher left running in
 * it is stopped first.
 *
 * @example
 *   const redis = await startRedis({ dataDir: ".local/redis" });
 *   // redis.url: redis://:…@127.0.0.1:PORT
 *   await redis.stop();
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { delimiter, join, resolve } from "node:path";
import { freePort } from "./ports.ts";
import { start } from "./process.ts";

export interface LocalRedis {
  /** redis:// URL with the password (or REDIS_URL as given). */
  url: string;
  stop(): Promise<void>;
  /** True when this call started a private redis-server. */
  private: boolean;
}

export async function startRedis(opts: { dataDir: string }): Promise<LocalRedis> {
  const external = process.env.REDIS_URL;
  if (external) return { url: external, private: false, async stop() {} };

  const dataDir = resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const command = await redisServer(dataDir);
  const port = await freePort();
  const password = randomBytes(24).toString("hex");
  const pidFile = join(dataDir, "redis.pid");
  await stopLeftover(realpathSync(dataDir), pidFile);
  const config = join(dataDir, "redis.conf");
  writeFileSync(config, `requirepass ${password}\n`, { mode: 0o600 });
  chmodSync(config, 0o600); // the mode above only applies when the file is created
  const child = await start({
    name: "redis-server",
    command,
    args: [config, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dataDir, "--pidfile", pidFile],
    logPath: join(dataDir, "redis.log"),
    ready: () => answersPing(port, password),
    timeoutMs: 15_000,
  });
  return { url: `redis://:${password}@127.0.0.1:${port}`, private: true, stop: () => child.stop() };
}

/**
 * Stops the redis-server named by an earlier run's pidfile, if it still runs in this dataDir
 * (`--dir` makes that its working directory; its title no longer names the config).
 */
async function stopLeftover(dataDir: string, pidFile: string): Promise<void> {
  const pid = existsSync(pidFile) ? Number.parseInt(readFileSync(pidFile, "utf8"), 10) : NaN;
  if (!Number.isInteger(pid) || pid <= 0 || !runsIn(pid, dataDir)) return;
  process.kill(pid, "SIGTERM");
  for (let waited = 0; runsIn(pid, dataDir); waited += 100) {
    if (waited === 5000) process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** False once the process is gone or a zombie (whose cwd can no longer be read). */
function runsIn(pid: number, dir: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === dir && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("redis");
  } catch {
    return false;
  }
}

/** Finds redis-server on PATH; as root on Debian/Ubuntu installs it, otherwise says how to. */
async function redisServer(dataDir: string): Promise<string> {
  const found = onPath("redis-server");
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new Error("redis-server is not installed: run `sudo apt-get install redis-server` (or set REDIS_URL to an existing Redis)");
  }
  const logPath = join(dataDir, "apt-get.log");
  const installed =
    (await run("apt-get", ["install", "-y", "redis-server"], logPath)) ||
    ((await run("apt-get", ["update"], logPath)) && (await run("apt-get", ["install", "-y", "redis-server"], logPath)));
  const path = installed ? onPath("redis-server") : undefined;
  if (!path) throw new Error(`apt-get could not install redis-server (log ${logPath}); install it yourself or set REDIS_URL`);
  return path;
}

function onPath(name: string): string | undefined {
  const dirs = (process.env.PATH ?? "").split(delimiter).concat("/usr/bin", "/usr/sbin", "/usr/local/bin");
  return dirs.map((dir) => join(dir, name)).find((path) => existsSync(path));
}

function run(command: string, args: string[], logPath: string): Promise<boolean> {
  const fd = openSync(logPath, "a");
  const child = spawn(command, args, { stdio: ["ignore", fd, fd], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  closeSync(fd);
  return new Promise((done) => {
    child.once("error", () => done(false));
    child.once("exit", (code) => done(code === 0));
  });
}

/** Readiness: AUTH and PING answered with +OK and +PONG over plain RESP. */
function answersPing(port: number, password: string): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(1000, () => finish(false));
    socket.once("error", () => finish(false));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n+PONG\r\n") || reply.startsWith("-")) finish(reply === "+OK\r\n+PONG\r\n");
    });
    socket.write(`*2\r\n$4\r\nAUTH\r\n$${password.length}\r\n${password}\r\n*1\r\n$4\r\nPING\r\n`);
  });
}
