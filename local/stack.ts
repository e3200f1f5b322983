/**
 * The whole service on loopback, for `npm start` and for isolated test stacks (runs on a developer
 * machine or in tests, never in production). Everything a stack writes lives under its `dataDir`.
 *
 *     const stack = await startStack({ dataDir: ".local/stack" });
 *     await fetch(`${stack.baseUrl}/health`);
 *     await stack.stop();
 *
 * Order: model file, Postgres and Redis, schema, the Neon bridge (for a loopback Postgres only; a
 * remote DATABASE_URL is Neon, reached directly) and the Upstash bridge, the runtime, the
 * registry entry for what the runtime reports, the sidecar, then the edge (local/edge.ts).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import pg from "pg";
import { IMAGE_BASE_ALIAS, SHARED_ALIAS } from "../contract/limits.ts";
import { isLoopbackHost } from "../contract/urls.ts";
import { Identity } from "../server-shared/runtime-protocol.ts";
import { migrate } from "../ops/migrate.ts";
import { pointAlias, registerRelease } from "../ops/releases.ts";
import { CONSOLE_CLIENT_ID, startIdp, type IdpInfo } from "./idp.ts";
import { ensureModel } from "./model.ts";
import { startBridges } from "./bridges.ts";
import { freePort } from "./ports.ts";
import { ensureImageBackbone } from "./image-backbone.ts";
import { ensureTextEncoder } from "./text-encoder.ts";
import { sidecarAddress, startRuntime, startSidecar, type StartedRuntime } from "./tiers.ts";
import { startEdge, type EdgeKind } from "./edge.ts";
import { startPostgres } from "./postgres.ts";
import type { Child } from "./process.ts";
import { startRedis } from "./redis.ts";

/** The variable that holds the local runtime's secret; the registry entry's `token_env`. */
export const RUNTIME_TOKEN_ENV = "SVC_RUNTIME_SECRET";
/** The same for the local image runtime. */
export const IMAGE_RUNTIME_TOKEN_ENV = "SVC_IMAGE_RUNTIME_SECRET";

export interface StackOptions {
  dataDir: string;
  /** Edge port; a free one when absent. */
  edgePort?: number;
  /** Identity provider port (its issuer URL includes it); a free one when absent. */
  idpPort?: number;
  /** Extra settings of the edge Worker, such as ALLOWED_ORIGIN. */
  edgeVars?: Record<string, string>;
  /** More settings of the stack's sidecar (tests: the SVC_TEST_BULK_* periods). */
  sidecarEnv?: Record<string, string>;
  /** How the edge Worker runs (local/edge.ts); "miniflare" when absent. */
  edge?: EdgeKind;
  /**
   * Start the image runtime (the ONNX backbone, local/image-backbone.ts) and register it as
   * IMAGE_BASE_ALIAS; by default when an image flag is on in `edgeVars`.
   */
  images?: boolean;
  /** Progress lines (to stderr by default). */
  log?: (line: string) => void;
}

export interface Piece {
  name: string;
  where: string;
  pid?: number;
  log?: string;
}

export interface Stack {
  baseUrl: string;
  pieces: Piece[];
  databaseUrl: string;
  redisUrl: string;
  release: Identity;
  /** The image runtime's identity; null when the stack runs without one. */
  imageRelease: Identity | null;
  idp: IdpInfo;
  /** Secrets of this stack, for tests that call internal tiers directly. */
  secrets: { runtime: string; imageRuntime: string; sidecar: string; upstash: string; storage: string };
  /** neonBridge is null when DATABASE_URL is remote (Neon): the tiers then use Neon's own endpoints. */
  urls: { runtime: string; imageRuntime: string | null; sidecar: string; upstash: string; neonBridge: string | null };
  children: Child[];
  /** Another edge over the same services, on a free port, stopped with the stack (benchmarks compare the two kinds; tests give it settings of its own). */
  addEdge(kind: EdgeKind, vars?: Record<string, string>): Promise<{ baseUrl: string; child: Child }>;
  /** Stops one data service (tests use it to show what an outage does). */
  stopService(name: "postgres" | "redis"): Promise<void>;
  /** Stops the embedded Postgres and starts it again on the same port with the same data (crash tests). */
  restartPostgres(): Promise<void>;
  /** Kills the runtime (SIGKILL); `restoreRuntime` starts it again at the same address (crash tests), with more settings when given (benchmarks). */
  crashRuntime(): Promise<void>;
  restoreRuntime(env?: Record<string, string>): Promise<void>;
  /** Kills the image runtime (SIGKILL); `restoreImageRuntime` starts it again at the same address, with more settings when given. */
  crashImageRuntime(): Promise<void>;
  restoreImageRuntime(env?: Record<string, string>): Promise<void>;
  /**
   * Ends the sidecar with `signal` (SIGKILL: a crash) and starts it again at the same address (crash
   * tests); `env` adds settings to the new process (a benchmark's baseline), on top of `sidecarEnv`.
   */
  restartSidecar(signal: "SIGKILL" | "SIGTERM", env?: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

function secret(): string {
  return randomBytes(32).toString("base64url");
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const log = opts.log ?? ((line: string) => console.error(line));
  const dataDir = resolve(opts.dataDir);
  const logDir = join(dataDir, "logs");
  mkdirSync(logDir, { recursive: true });
  // Postgres runs as its own user when we are root; it must be able to enter the data folder.
  if (process.getuid?.() === 0) chmodSync(dataDir, 0o711);

  const stoppers: Array<() => Promise<void>> = [];
  const children: Child[] = [];
  const stop = async () => {
    for (const stopOne of stoppers.reverse()) await stopOne().catch(() => {});
    stoppers.length = 0;
  };

  try {
    const model = await ensureModel();
    log(`model      ${model.path}`);
    const encoder = await ensureTextEncoder();

    const [postgres, redis, idp] = await startAll(stoppers, [
      startPostgres({ dataDir: join(dataDir, "postgres") }),
      startRedis({ dataDir: join(dataDir, "redis") }),
      startIdp({ dataDir: join(dataDir, "idp"), port: opts.idpPort }),
    ] as const);
    children.push(idp.child);
    let databaseServer = postgres;
    await migrate(postgres.url);

    const upstashToken = secret();
    // A remote DATABASE_URL (Neon) is reached at Neon's own endpoints: no Neon bridge then.
    const local = localDatabase(postgres.url);
    const bridges = await startBridges({ databaseUrl: local ? postgres.url : null, redisUrl: redis.url, upstashToken, logDir });
    children.push(bridges.child);
    stoppers.push(bridges.stop);
    const database = databaseSettings(postgres.url, bridges.neonBridge);

    const runtimeSecret = secret();
    // A developer's engine choices (a GPU build, more threads) carry over; nothing else of theirs does.
    const engineSettings = Object.fromEntries(["RUNTIME_GPU", "RUNTIME_THREADS"].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])));
    const runtimeOptions = { name: "runtime", modelPath: model.path, encoderPath: encoder.path, secret: runtimeSecret, logDir, env: engineSettings };
    let runtime = await startRuntime(runtimeOptions);
    let runtimeRestarts = 0;
    children.push(runtime.child);
    stoppers.push(() => runtime.child.stop());
    const identityRes = await fetch(`${runtime.url}/v1/identity`, { headers: { authorization: `Bearer ${runtimeSecret}` } });
    const release = Identity.parse(await identityRes.json());

    const imageRuntimeSecret = secret();
    const images = opts.images ?? ["IMAGE_API", "IMAGE_BROWSER"].some((flag) => opts.edgeVars?.[flag] === "on");
    let imageRuntime: StartedRuntime | null = null;
    let imageRelease: Identity | null = null;
    let imageRuntimeOptions: Parameters<typeof startRuntime>[0] | null = null;
    let imageRuntimeRestarts = 0;
    if (images) {
      const backbone = await ensureImageBackbone();
      imageRuntimeOptions = { name: "image-runtime", kind: "image", modelPath: backbone.path, secret: imageRuntimeSecret, logDir, env: engineSettings };
      imageRuntime = await startRuntime(imageRuntimeOptions);
      children.push(imageRuntime.child);
      stoppers.push(() => imageRuntime!.child.stop());
      const res = await fetch(`${imageRuntime.url}/v1/identity`, { headers: { authorization: `Bearer ${imageRuntimeSecret}` } });
      imageRelease = Identity.parse(await res.json());
    }

    const sidecarSecret = secret();
    const sidecarAt = await sidecarAddress();
    const db = new pg.Client({ connectionString: postgres.url });
    await db.connect();
    try {
      await registerRelease(db, {
        id: release.release_id,
        fingerprint: release.fingerprint,
        url: runtime.url,
        token_env: RUNTIME_TOKEN_ENV,
        release_date: new Date().toISOString().slice(0, 10),
        description: `Local ${release.engine} runtime`,
        owners: null,
        sidecar_url: sidecarAt.url,
      });
      await pointAlias(db, SHARED_ALIAS, release.release_id);
      if (imageRuntime && imageRelease) {
        await registerRelease(db, {
          id: imageRelease.release_id,
          fingerprint: imageRelease.fingerprint,
          url: imageRuntime.url,
          token_env: IMAGE_RUNTIME_TOKEN_ENV,
          release_date: new Date().toISOString().slice(0, 10),
          description: `Local image backbone (${imageRelease.engine}): the base of trained image models`,
          owners: null,
          sidecar_url: sidecarAt.url,
          modality: "image",
        });
        await pointAlias(db, IMAGE_BASE_ALIAS, imageRelease.release_id);
      }
    } finally {
      await db.end();
    }

    // The edge's address is known before it starts: the sidecar's bulk worker asks it for grants.
    const edgePort = opts.edgePort ?? (await freePort());
    const baseUrl = `http://127.0.0.1:${edgePort}`;
    const sidecarOptions = {
      name: "sidecar",
      address: sidecarAt,
      secret: sidecarSecret,
      database,
      runtimeSecrets: { [RUNTIME_TOKEN_ENV]: runtimeSecret, [IMAGE_RUNTIME_TOKEN_ENV]: imageRuntimeSecret },
      edgeUrl: baseUrl,
      upstash: { url: bridges.upstashUrl, token: upstashToken },
      extraEnv: opts.sidecarEnv,
      logDir,
    };
    let sidecar = await startSidecar(sidecarOptions);
    children.push(sidecar);
    stoppers.push(() => sidecar.stop());

    // The key pair that signs storage grants: the edge serves them itself over local R2.
    const storageKeyId = `local-${randomBytes(8).toString("hex")}`;
    const storageSecret = secret();
    const envFile = join(dataDir, "edge.env");
    writeFileSync(
      envFile,
      Object.entries({
        ...database,
        UPSTASH_REDIS_REST_URL: bridges.upstashUrl,
        UPSTASH_REDIS_REST_TOKEN: upstashToken,
        SIDECAR_SECRET: sidecarSecret,
        STORAGE_ACCESS_KEY_ID: storageKeyId,
        STORAGE_SECRET_ACCESS_KEY: storageSecret,
        OIDC_ISSUER: idp.issuer,
        OIDC_AUDIENCE: idp.audience,
        OIDC_JWKS_URL: idp.jwksUrl,
        OIDC_CONSOLE_CLIENT_ID: CONSOLE_CLIENT_ID,
        ...opts.edgeVars,
      })
        .map(([key, value]) => `${key}=${value}\n`)
        .join(""),
      { mode: 0o600 },
    );
    chmodSync(envFile, 0o600);
    const edgeKind = opts.edge ?? "miniflare";
    const edge = await startEdge({ kind: edgeKind, port: edgePort, envFile, dataDir, logDir });
    children.push(edge);
    stoppers.push(edge.stop);

    const pieces: Piece[] = [
      { name: `edge (${edgeKind === "miniflare" ? "workerd via Miniflare" : "wrangler dev"})`, where: baseUrl, pid: edge.proc.pid, log: edge.logPath },
      { name: "sidecar (bun)", where: sidecarAt.url, pid: sidecar.proc.pid, log: sidecar.logPath },
      { name: `runtime ${release.release_id}`, where: runtime.url, pid: runtime.child.proc.pid, log: runtime.child.logPath },
      ...(imageRuntime && imageRelease
        ? [{ name: `image runtime ${imageRelease.release_id}`, where: imageRuntime.url, pid: imageRuntime.child.proc.pid, log: imageRuntime.child.logPath }]
        : []),
      { name: "identity provider (OpenID)", where: idp.issuer, pid: idp.child.proc.pid, log: idp.child.logPath },
      { name: postgres.embedded ? "postgres (embedded)" : "postgres (DATABASE_URL)", where: redact(postgres.url) },
      { name: redis.private ? "redis (private)" : "redis (REDIS_URL)", where: redact(redis.url) },
      database.NEON_LOCAL_BRIDGE
        ? { name: "neon bridge (ws + /sql)", where: `http://${database.NEON_LOCAL_BRIDGE}` }
        : { name: "neon (DATABASE_URL is remote)", where: "Neon's own endpoints, no bridge" },
      { name: "upstash bridge (REST)", where: bridges.upstashUrl },
      { name: "r2 (local)", where: join(dataDir, "wrangler") },
    ];
    return {
      baseUrl,
      pieces,
      databaseUrl: postgres.url,
      redisUrl: redis.url,
      release,
      imageRelease,
      idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, audience: idp.audience, clientId: idp.clientId },
      secrets: { runtime: runtimeSecret, imageRuntime: imageRuntimeSecret, sidecar: sidecarSecret, upstash: upstashToken, storage: storageSecret },
      urls: { runtime: runtime.url, imageRuntime: imageRuntime?.url ?? null, sidecar: sidecarAt.url, upstash: bridges.upstashUrl, neonBridge: database.NEON_LOCAL_BRIDGE ? `http://${database.NEON_LOCAL_BRIDGE}` : null },
      children,
      addEdge: async (kind, vars) => {
        const port = await freePort();
        // Settings of its own when asked (a flag off, a test period): the stack's, with these on top.
        let edgeEnv = envFile;
        if (vars) {
          edgeEnv = join(dataDir, `edge-${port}.env`);
          writeFileSync(edgeEnv, readFileSync(envFile, "utf8") + Object.entries(vars).map(([key, value]) => `${key}=${value}\n`).join(""), { mode: 0o600 });
        }
        const child = await startEdge({ kind, port, envFile: edgeEnv, dataDir, logDir, logName: `edge-${kind}-${port}.log` });
        children.push(child);
        stoppers.push(child.stop);
        return { baseUrl: `http://127.0.0.1:${port}`, child };
      },
      stopService: (name) => (name === "postgres" ? databaseServer.stop() : redis.stop()),
      restartPostgres: async () => {
        await databaseServer.stop();
        databaseServer = await startPostgres({ dataDir: join(dataDir, "postgres"), port: Number(new URL(databaseServer.url).port) });
        stoppers.push(() => databaseServer.stop());
      },
      crashRuntime: () => runtime.child.kill(),
      restoreRuntime: async (env) => {
        // A log of its own: the first one already holds a READY line.
        const restarted = await startRuntime({
          ...runtimeOptions,
          env: { ...runtimeOptions.env, ...env },
          name: `runtime-restart-${++runtimeRestarts}`,
          port: Number(new URL(runtime.url).port),
        });
        children.splice(children.indexOf(runtime.child), 1, restarted.child);
        runtime = restarted;
      },
      crashImageRuntime: async () => {
        if (!imageRuntime) throw new Error("this stack runs no image runtime");
        await imageRuntime.child.kill();
      },
      restoreImageRuntime: async (env) => {
        if (!imageRuntime || !imageRuntimeOptions) throw new Error("this stack runs no image runtime");
        await imageRuntime.child.kill().catch(() => undefined);
        const restarted = await startRuntime({
          ...imageRuntimeOptions,
          env: { ...imageRuntimeOptions.env, ...env },
          name: `image-runtime-restart-${++imageRuntimeRestarts}`,
          port: Number(new URL(imageRuntime.url).port),
        });
        children.splice(children.indexOf(imageRuntime.child), 1, restarted.child);
        imageRuntime = restarted;
      },
      restartSidecar: async (signal, env) => {
        if (signal === "SIGKILL") await sidecar.kill();
        else await sidecar.stop();
        const restarted = await startSidecar({ ...sidecarOptions, extraEnv: { ...opts.sidecarEnv, ...env } });
        children.splice(children.indexOf(sidecar), 1, restarted);
        sidecar = restarted;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Starts services in parallel and registers every one that started with `stoppers`, even when
 * another failed, so that a failed start leaves nothing running.
 */
async function startAll<T extends readonly Promise<{ stop(): Promise<void> }>[]>(
  stoppers: Array<() => Promise<void>>,
  starting: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(starting);
  for (const result of results) if (result.status === "fulfilled") stoppers.push(result.value.stop);
  const failed = results.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** Whether the Neon driver needs the local bridge to reach `databaseUrl`: a loopback (or socket) Postgres. */
export function localDatabase(databaseUrl: string): boolean {
  const host = new URL(databaseUrl).hostname;
  return host === "" || isLoopbackHost(host);
}

/**
 * The database settings of the edge and the sidecar: a remote database (Neon) as it is, reached at
 * Neon's own endpoints; a loopback one through the local Neon bridge (server-shared/neon-route.ts
 * refuses anything else).
 */
export function databaseSettings(databaseUrl: string, neonBridge: string | null): { DATABASE_URL: string; NEON_LOCAL_BRIDGE?: string } {
  if (!localDatabase(databaseUrl)) return { DATABASE_URL: databaseUrl };
  if (!neonBridge) throw new Error("a loopback DATABASE_URL needs the local Neon bridge");
  return { DATABASE_URL: databaseUrl, NEON_LOCAL_BRIDGE: neonBridge };
}

/** A connection URL without its password, for printing. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unprintable URL)";
  }
}
