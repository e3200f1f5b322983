/**
 * The whole service on loopback, for `npm start` and for isolated test stacks (runs on a developer
 * machine or in tests, never in production). Everything a stack writes lives under its `dataDir`.
 *
 *     const stack = await startStack({ dataDir: ".local/stack" });
 *     await fetch(`${stack.baseUrl}/health`);
 *     await stack.stop();
 *
 * Order: the model files, then Postgres, Redis and the identity provider together, the schema, the
 * Neon bridge (for a loopback Postgres only; a remote DATABASE_URL is Neon, reached directly) and the
 * Upstash bridge, the runtime (and the image runtime when asked), the registry entries for what they
 * report, the sidecar, then the edge (local/edge.ts). `startStack` reads as that list: each step is a
 * function below that registers what it starts (local/started.ts), so that a step that fails stops
 * every piece started before it.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import pg from "pg";
import { IMAGE_BASE_ALIAS, SHARED_ALIAS } from "../contract/limits.ts";
import { isLoopbackHost } from "../contract/urls.ts";
import type { Identity } from "../server-shared/runtime-protocol.ts";
import { migrate } from "../ops/migrate.ts";
import { pointAlias, registerRelease } from "../ops/releases.ts";
import { CONSOLE_CLIENT_ID, startIdp, type IdpInfo } from "./idp.ts";
import { ensureModel } from "./model.ts";
import { startBridges } from "./bridges.ts";
import { freePort } from "./ports.ts";
import { ensureImageBackbone } from "./image-backbone.ts";
import { ensureTextEncoder } from "./text-encoder.ts";
import { sidecarAddress } from "./tiers.ts";
import { startEdge, type EdgeKind } from "./edge.ts";
import { startPostgres } from "./postgres.ts";
import type { Child } from "./process.ts";
import { startRedis } from "./redis.ts";
import { nothingStarted, startAll, startRestartableRuntime, startRestartableSidecar, type RestartableRuntime, type RestartableSidecar, type Started } from "./started.ts";

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
  /** More settings of the stack's sidecar (tests: the SVC_TEST_* periods). */
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
  secrets: { runtime: string; imageRuntime: string; sidecar: string; upstash: string; storage: string; metrics: string; webhookKey: string };
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

type DatabaseSettings = ReturnType<typeof databaseSettings>;
type Services = Awaited<ReturnType<typeof startServices>>;
type ProtocolBridges = Awaited<ReturnType<typeof startProtocolBridges>>;

export async function startStack(opts: StackOptions): Promise<Stack> {
  const log = opts.log ?? ((line: string) => console.error(line));
  const { dataDir, logDir } = prepareDataDir(opts.dataDir);
  const started = nothingStarted();
  try {
    const model = await ensureModel();
    log(`model      ${model.path}`);
    const encoder = await ensureTextEncoder();
    const secrets = newSecrets(dataDir);
    const services = await startServices(started, dataDir, opts.idpPort);
    const { postgres, redis, idp } = services;
    const bridges = await startProtocolBridges(started, postgres.url, redis.url, secrets.upstash, logDir);
    const { upstashUrl, database } = bridges;

    // The runtimes and the sidecar serve /metrics to a bearer of the operator's scrape secret.
    const engineSettings = { ...developerEngineSettings(), METRICS_SECRET: secrets.metrics };
    const runtime = await startRestartableRuntime(started, { name: "runtime", modelPath: model.path, encoderPath: encoder.path, secret: secrets.runtime, logDir, env: engineSettings });
    const imageRuntime = wantsImages(opts) ? await startImageRuntime(started, secrets.imageRuntime, logDir, engineSettings) : null;

    const sidecarAt = await sidecarAddress();
    await registerLocalReleases(postgres.url, sidecarAt.url, runtime, imageRuntime);
    await moveServedReleases(postgres.url, dataDir, sidecarAt.url);

    // The edge's address is known before it starts: the sidecar's bulk worker asks it for grants.
    const edgePort = opts.edgePort ?? (await freePort());
    const baseUrl = `http://127.0.0.1:${edgePort}`;
    const sidecar = await startRestartableSidecar(started, {
      name: "sidecar",
      address: sidecarAt,
      secret: secrets.sidecar,
      database,
      runtimeSecrets: { [RUNTIME_TOKEN_ENV]: secrets.runtime, [IMAGE_RUNTIME_TOKEN_ENV]: secrets.imageRuntime },
      edgeUrl: baseUrl,
      upstash: { url: upstashUrl, token: secrets.upstash },
      webhookKey: secrets.webhookKey,
      extraEnv: { METRICS_SECRET: secrets.metrics, ...opts.sidecarEnv },
      logDir,
    });

    const envFile = writeEdgeEnv(dataDir, { database, upstashUrl, secrets, idp, baseUrl, edgeVars: opts.edgeVars });
    const edgeKind = opts.edge ?? "miniflare";
    const edge = await startEdge({ kind: edgeKind, port: edgePort, envFile, dataDir, logDir });
    started.add(edge, edge.stop);

    let databaseServer = postgres;
    return {
      baseUrl,
      pieces: describePieces({ dataDir, edge: { kind: edgeKind, baseUrl, child: edge }, sidecar, runtime, imageRuntime, services, bridges }),
      databaseUrl: postgres.url,
      redisUrl: redis.url,
      release: runtime.release,
      imageRelease: imageRuntime?.release ?? null,
      idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, audience: idp.audience, clientId: idp.clientId },
      secrets,
      urls: { runtime: runtime.url, imageRuntime: imageRuntime?.url ?? null, sidecar: sidecar.url, upstash: upstashUrl, neonBridge: neonBridgeUrl(database) },
      children: started.children,
      addEdge: (kind, vars) => addEdge(started, { dataDir, logDir, envFile }, kind, vars),
      stopService: (name) => (name === "postgres" ? databaseServer.stop() : redis.stop()),
      restartPostgres: async () => {
        await databaseServer.stop();
        databaseServer = await startPostgres({ dataDir: join(dataDir, "postgres"), port: Number(new URL(databaseServer.url).port) });
        started.onStop(() => databaseServer.stop());
      },
      crashRuntime: () => runtime.child.kill(),
      restoreRuntime: (env) => runtime.restore(env),
      crashImageRuntime: async () => {
        if (!imageRuntime) throw new Error("this stack runs no image runtime");
        await imageRuntime.child.kill();
      },
      restoreImageRuntime: async (env) => {
        if (!imageRuntime) throw new Error("this stack runs no image runtime");
        await imageRuntime.child.kill().catch(() => undefined);
        await imageRuntime.restore(env);
      },
      restartSidecar: (signal, env) => sidecar.restart(signal, env),
      stop: started.stop,
    };
  } catch (err) {
    await started.stop();
    throw err;
  }
}

/** The stack's folder and its `logs` folder, made. */
function prepareDataDir(dir: string): { dataDir: string; logDir: string } {
  const dataDir = resolve(dir);
  const logDir = join(dataDir, "logs");
  mkdirSync(logDir, { recursive: true });
  // Postgres runs as its own user when we are root; it must be able to enter the data folder.
  if (process.getuid?.() === 0) chmodSync(dataDir, 0o711);
  return { dataDir, logDir };
}

function secret(): string {
  return randomBytes(32).toString("base64url");
}

function newSecrets(dataDir: string): Stack["secrets"] {
  return { runtime: secret(), imageRuntime: secret(), sidecar: secret(), upstash: secret(), storage: secret(), metrics: secret(), webhookKey: webhookKeyOf(dataDir) };
}

/**
 * The stack's WEBHOOK_SECRET_KEY (32 random bytes in base64url), kept in `<dataDir>/webhook-secret-key`
 * (mode 0600): the endpoints' secrets in its database are sealed under it, so a stack started again
 * over the same data needs the same key, where every other secret may be new.
 */
function webhookKeyOf(dataDir: string): string {
  const path = join(dataDir, "webhook-secret-key");
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  const key = secret();
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  return key;
}

/** Postgres with the schema applied, Redis and the identity provider; the three start in parallel. */
async function startServices(started: Started, dataDir: string, idpPort: number | undefined) {
  const [postgres, redis, idp] = await startAll(started, [
    startPostgres({ dataDir: join(dataDir, "postgres") }),
    startRedis({ dataDir: join(dataDir, "redis") }),
    startIdp({ dataDir: join(dataDir, "idp"), port: idpPort }),
  ] as const);
  // Listed among the children; startAll has registered its stop already.
  started.children.push(idp.child);
  await migrate(postgres.url);
  return { postgres, redis, idp };
}

/** The Neon and Upstash bridges, and the database settings of the edge and the sidecar that go with them. */
async function startProtocolBridges(
  started: Started,
  databaseUrl: string,
  redisUrl: string,
  upstashToken: string,
  logDir: string,
): Promise<{ upstashUrl: string; database: DatabaseSettings }> {
  // A remote DATABASE_URL (Neon) is reached at Neon's own endpoints: no Neon bridge then.
  const bridges = await startBridges({ databaseUrl: localDatabase(databaseUrl) ? databaseUrl : null, redisUrl, upstashToken, logDir });
  started.add(bridges.child, bridges.stop);
  return { upstashUrl: bridges.upstashUrl, database: databaseSettings(databaseUrl, bridges.neonBridge) };
}

/** A developer's engine choices (a GPU build, more threads) carry over to the runtimes; nothing else of theirs does. */
function developerEngineSettings(): Record<string, string> {
  return Object.fromEntries(["RUNTIME_GPU", "RUNTIME_THREADS"].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])));
}

/** Whether the stack runs the image runtime: as asked, else when an image flag is on for the edge. */
function wantsImages(opts: StackOptions): boolean {
  return opts.images ?? ["IMAGE_API", "IMAGE_BROWSER"].some((flag) => opts.edgeVars?.[flag] === "on");
}

/** The image runtime over the ONNX backbone (local/image-backbone.ts), fetched on first use. */
async function startImageRuntime(started: Started, runtimeSecret: string, logDir: string, env: Record<string, string>): Promise<RestartableRuntime> {
  const backbone = await ensureImageBackbone();
  return startRestartableRuntime(started, { name: "image-runtime", kind: "image", modelPath: backbone.path, secret: runtimeSecret, logDir, env });
}

/** The registry entries for what the runtimes report, served by the sidecar at `sidecarUrl`, and the aliases that name them. */
async function registerLocalReleases(databaseUrl: string, sidecarUrl: string, runtime: RestartableRuntime, imageRuntime: RestartableRuntime | null): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await registerRelease(db, {
      id: runtime.release.release_id,
      fingerprint: runtime.release.fingerprint,
      url: runtime.url,
      token_env: RUNTIME_TOKEN_ENV,
      release_date: new Date().toISOString().slice(0, 10),
      description: `Local ${runtime.release.engine} runtime`,
      owners: null,
      sidecar_url: sidecarUrl,
    });
    await pointAlias(db, SHARED_ALIAS, runtime.release.release_id);
    if (imageRuntime) {
      await registerRelease(db, {
        id: imageRuntime.release.release_id,
        fingerprint: imageRuntime.release.fingerprint,
        url: imageRuntime.url,
        token_env: IMAGE_RUNTIME_TOKEN_ENV,
        release_date: new Date().toISOString().slice(0, 10),
        description: `Local image backbone (${imageRuntime.release.engine}): the base of trained image models`,
        owners: null,
        sidecar_url: sidecarUrl,
        modality: "image",
      });
      await pointAlias(db, IMAGE_BASE_ALIAS, imageRuntime.release.release_id);
    }
  } finally {
    await db.end();
  }
}

/**
 * A stack started again over the same data has a new sidecar address: the releases the earlier
 * run's sidecar served (its trained models) move to the new one, so that they answer and /health
 * finds every sidecar it names. The address is kept in `<dataDir>/sidecar-url` for the next run.
 */
async function moveServedReleases(databaseUrl: string, dataDir: string, sidecarUrl: string): Promise<void> {
  const path = join(dataDir, "sidecar-url");
  const previous = existsSync(path) ? readFileSync(path, "utf8").trim() : null;
  if (previous && previous !== sidecarUrl) {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query("UPDATE model_releases SET sidecar_url = $2 WHERE sidecar_url = $1 AND retired_at IS NULL", [previous, sidecarUrl]);
    } finally {
      await db.end();
    }
  }
  writeFileSync(path, `${sidecarUrl}\n`);
}

/** Writes the edge Worker's settings to `<dataDir>/edge.env` (mode 0600) and returns its path. */
function writeEdgeEnv(
  dataDir: string,
  settings: { database: DatabaseSettings; upstashUrl: string; secrets: Stack["secrets"]; idp: IdpInfo; baseUrl: string; edgeVars?: Record<string, string> },
): string {
  const { database, upstashUrl, secrets, idp, baseUrl, edgeVars } = settings;
  // The key pair that signs storage grants: the edge serves them itself over local R2.
  const storageKeyId = `local-${randomBytes(8).toString("hex")}`;
  const envFile = join(dataDir, "edge.env");
  writeFileSync(
    envFile,
    envLines({
      ...database,
      UPSTASH_REDIS_REST_URL: upstashUrl,
      UPSTASH_REDIS_REST_TOKEN: secrets.upstash,
      SIDECAR_SECRET: secrets.sidecar,
      WEBHOOK_SECRET_KEY: secrets.webhookKey,
      // The operator's read-only secret, the sidecar's and runtime's too: /health gives its bearer the full report.
      METRICS_SECRET: secrets.metrics,
      STORAGE_ACCESS_KEY_ID: storageKeyId,
      STORAGE_SECRET_ACCESS_KEY: secrets.storage,
      OIDC_ISSUER: idp.issuer,
      OIDC_AUDIENCE: idp.audience,
      OIDC_JWKS_URL: idp.jwksUrl,
      OIDC_CONSOLE_CLIENT_ID: CONSOLE_CLIENT_ID,
      // Grants point where the edge listens, whatever Host a request names.
      PUBLIC_URL: baseUrl,
      // Webhook receivers on this machine (a developer's, a test's): never in production.
      WEBHOOK_PRIVATE_TARGETS: "on",
      ...edgeVars,
    }),
    { mode: 0o600 },
  );
  chmodSync(envFile, 0o600);
  return envFile;
}

function envLines(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([key, value]) => `${key}=${value}\n`)
    .join("");
}

/** `Stack.addEdge`: another edge on a free port, with the stack's settings and `vars` on top. */
async function addEdge(
  started: Started,
  where: { dataDir: string; logDir: string; envFile: string },
  kind: EdgeKind,
  vars: Record<string, string> | undefined,
): Promise<{ baseUrl: string; child: Child }> {
  const { dataDir, logDir, envFile } = where;
  const port = await freePort();
  // The stack's settings with its own address (where its grants point) and, when asked, settings of
  // its own on top (a flag off, a test period).
  const baseUrl = `http://127.0.0.1:${port}`;
  const edgeEnv = join(dataDir, `edge-${port}.env`);
  writeFileSync(edgeEnv, readFileSync(envFile, "utf8") + envLines({ PUBLIC_URL: baseUrl, ...vars }), { mode: 0o600 });
  const child = await startEdge({ kind, port, envFile: edgeEnv, dataDir, logDir, logName: `edge-${kind}-${port}.log` });
  started.add(child, child.stop);
  return { baseUrl, child };
}

function neonBridgeUrl(database: DatabaseSettings): string | null {
  return database.NEON_LOCAL_BRIDGE ? `http://${database.NEON_LOCAL_BRIDGE}` : null;
}

/** What `npm start` prints: each piece of the stack, where it answers, and its process and log when it has one. */
function describePieces(stack: {
  dataDir: string;
  edge: { kind: EdgeKind; baseUrl: string; child: Child };
  sidecar: RestartableSidecar;
  runtime: RestartableRuntime;
  imageRuntime: RestartableRuntime | null;
  services: Services;
  bridges: ProtocolBridges;
}): Piece[] {
  const { edge, sidecar, runtime, imageRuntime } = stack;
  const { postgres, redis, idp } = stack.services;
  const { database, upstashUrl } = stack.bridges;
  return [
    { name: `edge (${edge.kind === "miniflare" ? "workerd via Miniflare" : "wrangler dev"})`, where: edge.baseUrl, pid: edge.child.proc.pid, log: edge.child.logPath },
    { name: "sidecar (bun)", where: sidecar.url, pid: sidecar.child.proc.pid, log: sidecar.child.logPath },
    { name: `runtime ${runtime.release.release_id}`, where: runtime.url, pid: runtime.child.proc.pid, log: runtime.child.logPath },
    ...(imageRuntime
      ? [{ name: `image runtime ${imageRuntime.release.release_id}`, where: imageRuntime.url, pid: imageRuntime.child.proc.pid, log: imageRuntime.child.logPath }]
      : []),
    { name: "identity provider (OpenID)", where: idp.issuer, pid: idp.child.proc.pid, log: idp.child.logPath },
    { name: postgres.embedded ? "postgres (embedded)" : "postgres (DATABASE_URL)", where: redact(postgres.url) },
    { name: redis.private ? "redis (private)" : "redis (REDIS_URL)", where: redact(redis.url) },
    database.NEON_LOCAL_BRIDGE
      ? { name: "neon bridge (ws + /sql)", where: `http://${database.NEON_LOCAL_BRIDGE}` }
      : { name: "neon (DATABASE_URL is remote)", where: "Neon's own endpoints, no bridge" },
    { name: "upstash bridge (REST)", where: upstashUrl },
    { name: "r2 (local)", where: join(stack.dataDir, "wrangler") },
  ];
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
