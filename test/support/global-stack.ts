/**
 * Vitest global setup: one isolated stack (temp data dir, free ports) shared by the API test files,
 * and, when the run ends, a scan of every log that stack wrote for every secret the tests used
 * (API keys, user tokens, service secrets). A secret found in a log fails the run.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startStack, type Stack } from "../../local/stack.ts";

export const ALLOWED_ORIGIN = "https://console.example.test";

export interface StackInfo {
  baseUrl: string;
  databaseUrl: string;
  issuer: string;
  sidecarUrl: string;
  upstashUrl: string;
  secrets: Stack["secrets"];
  releaseId: string;
  runtimeUrl: string;
  /** The image runtime (the global stack runs with the image flags on). */
  imageRuntimeUrl: string;
  /** `127.0.0.1:<port>` of the stack's Neon bridge, for extra sidecars a test starts. */
  neonBridge: string;
  logDir: string;
  ledgerPath: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

let stack: Stack | undefined;
let dataDir: string;

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  dataDir = mkdtempSync(join(tmpdir(), "svc-test-stack-"));
  chmodSync(dataDir, 0o711);
  stack = await startStack({ dataDir, log: () => {}, edgeVars: { ALLOWED_ORIGIN, IMAGE_API: "on", IMAGE_BROWSER: "on" } });
  const ledgerPath = join(dataDir, "secrets-used.txt");
  writeFileSync(ledgerPath, Object.values(stack.secrets).join("\n") + "\n");
  project.provide("stack", {
    baseUrl: stack.baseUrl,
    databaseUrl: stack.databaseUrl,
    issuer: stack.idp.issuer,
    sidecarUrl: stack.urls.sidecar,
    upstashUrl: stack.urls.upstash,
    secrets: stack.secrets,
    releaseId: stack.release.release_id,
    runtimeUrl: stack.urls.runtime,
    imageRuntimeUrl: stack.urls.imageRuntime!,
    neonBridge: stack.urls.neonBridge!.replace("http://", ""),
    logDir: join(dataDir, "logs"),
    ledgerPath,
  });
  return teardown;
}

async function teardown(): Promise<void> {
  await stack?.stop();
  try {
    const leaks = scanLogs(dataDir, join(dataDir, "secrets-used.txt"));
    if (leaks.length > 0) throw new Error(`secrets found in logs: ${leaks.join(", ")}`);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Every form a secret can take in a log: as it is, URL-encoded, and base64 or base64url-encoded at
 * each of the three byte alignments it can have inside a longer encoded text (for each, the part of
 * the encoding that depends on the secret's bytes alone).
 */
export function encodedForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret)]);
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.from("\0".repeat(offset) + secret).toString("base64");
    const core = encoded.slice(offset === 0 ? 0 : 4, -4);
    forms.add(core);
    forms.add(core.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return [...forms];
}

/** Files under `dir` (logs, not data) that contain any secret of the ledger, in any encoding: "file (secret #n)". */
export function scanLogs(dir: string, ledgerPath: string): string[] {
  const secrets = readFileSync(ledgerPath, "utf8").split("\n").filter((s) => s.length >= 16);
  const leaks: string[] = [];
  for (const file of logFiles(dir)) {
    const text = readFileSync(file, "utf8");
    secrets.forEach((secret, i) => {
      if (encodedForms(secret).some((form) => text.includes(form))) leaks.push(`${file} (secret #${i})`);
    });
  }
  if (secrets.length < 3) throw new Error("the secrets ledger is nearly empty; the scan would prove nothing");
  return leaks;
}

function logFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return logFiles(path);
    return /\.log$|\.txt$/.test(name) && name !== "secrets-used.txt" ? [path] : [];
  });
}
