/**
 * The local stack's OpenID provider (runs on a developer machine or in tests, never in production):
 * starts local/idp-main.ts under Bun on loopback, and owns its signing keys.
 *
 *     const idp = await startIdp({ dataDir: ".local/stack/idp" });
 *     // edge settings: OIDC_ISSUER=idp.issuer, OIDC_AUDIENCE=idp.audience, OIDC_JWKS_URL=idp.jwksUrl
 *     await idp.stop();
 *
 * The keys live in `dataDir/idp-keys.json` (mode 0600), so tokens stay valid across restarts;
 * `dataDir/idp.json` names the running provider for local commands (local/print-user-token.ts).
 */
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { calculateJwkThumbprint, type JWK } from "jose";
import { freePort, portInUse } from "./ports.ts";
import { start, type Child } from "./process.ts";

const ROOT = resolve(import.meta.dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");

/** The audience of user access tokens: the resource server that the edge's key routes are. */
export const SVC_API_AUDIENCE = "svc-api";
/** The command-line tool's client: public (no secret), so PKCE is what protects its codes. */
export const CLI_CLIENT_ID = "svc-cli";
/** What the CLI registers as its redirect; any loopback port is accepted (RFC 8252, section 7.3). */
export const CLI_REDIRECT_URI = "http://127.0.0.1/callback";
/** The web console's client (console/): public too, redirected to the edge's `/console/` on any loopback port. */
export const CONSOLE_CLIENT_ID = "svc-console";
export const CONSOLE_REDIRECT_URI = "http://127.0.0.1/console/";
/** Every key is ES256: small keys, and an algorithm every hosted provider and jose support. */
export const SIGNING_ALG = "ES256";

export interface IdpInfo {
  issuer: string;
  jwksUrl: string;
  audience: string;
  clientId: string;
}

export interface Idp extends IdpInfo {
  child: Child;
  stop(): Promise<void>;
}

export const idpKeysPath = (dataDir: string) => join(dataDir, "idp-keys.json");
export const idpInfoPath = (dataDir: string) => join(dataDir, "idp.json");
const idpPortPath = (dataDir: string) => join(dataDir, "idp-port");

/**
 * The issuer URL includes the port, so a restart on another port would invalidate every token
 * issued before it: the previous port is reused while it is free.
 */
async function choosePort(dataDir: string): Promise<number> {
  const previous = existsSync(idpPortPath(dataDir)) ? Number(readFileSync(idpPortPath(dataDir), "utf8")) : 0;
  if (previous > 0 && !(await portInUse(previous))) return previous;
  return freePort();
}

async function newSigningKey(): Promise<JWK> {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = privateKey.export({ format: "jwk" }) as JWK;
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg: SIGNING_ALG, use: "sig" };
}

function writeKeys(dataDir: string, keys: JWK[]): void {
  const path = idpKeysPath(dataDir);
  const tmp = `${path}.${process.pid}.tmp`;
  // Written aside and renamed, so a provider starting meanwhile never reads half a file.
  writeFileSync(tmp, JSON.stringify({ keys }, null, 2), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

/** The private signing keys, newest (the one that signs) first; created on first use. */
export async function loadIdpKeys(dataDir: string): Promise<JWK[]> {
  const path = idpKeysPath(dataDir);
  if (existsSync(path)) return (JSON.parse(readFileSync(path, "utf8")) as { keys: JWK[] }).keys;
  mkdirSync(dataDir, { recursive: true });
  const keys = [await newSigningKey()];
  writeKeys(dataDir, keys);
  return keys;
}

/**
 * Puts a new signing key first and keeps the previous one published, so tokens it signed verify
 * until they expire (an hour); older keys are dropped. The provider reads the file when it starts.
 * Returns the new key's `kid`.
 */
export async function rotateIdpKeys(dataDir: string): Promise<string> {
  const previous = await loadIdpKeys(dataDir);
  const next = await newSigningKey();
  writeKeys(dataDir, [next, ...previous.slice(0, 1)]);
  return next.kid as string;
}

/**
 * Starts the provider on 127.0.0.1 and writes `idp.json`. Without `port`, it takes the port of the
 * previous start in this `dataDir` when that is free, else a free one.
 */
export async function startIdp(opts: { dataDir: string; port?: number }): Promise<Idp> {
  const dataDir = resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  await loadIdpKeys(dataDir);
  const port = opts.port ?? (await choosePort(dataDir));
  const issuer = `http://127.0.0.1:${port}`;
  const child = await start({
    name: "idp",
    command: BUN,
    args: [join(ROOT, "local/idp-main.ts")],
    // DEBUG is cleared because oidc-provider's debug output would print codes and tokens.
    env: { IDP_PORT: String(port), IDP_DATA_DIR: dataDir, DEBUG: "" },
    logPath: join(dataDir, "idp.log"),
    ready: async () => (await fetch(`${issuer}/.well-known/openid-configuration`)).status === 200,
    timeoutMs: 30_000,
  });
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as { jwks_uri: string };
  const info: IdpInfo = { issuer, jwksUrl: discovery.jwks_uri, audience: SVC_API_AUDIENCE, clientId: CLI_CLIENT_ID };
  writeFileSync(idpInfoPath(dataDir), JSON.stringify(info, null, 2));
  writeFileSync(idpPortPath(dataDir), String(port));
  return {
    ...info,
    child,
    async stop() {
      rmSync(idpInfoPath(dataDir), { force: true });
      await child.stop();
    },
  };
}
