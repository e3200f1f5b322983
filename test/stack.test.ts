/**
 * The whole local stack, isolated (own temp data dir, free ports): every link proven by the edge's
 * health route through the real Worker under workerd, the real sidecar under Bun, the real runtime
 * with the default model, Postgres and Redis behind the production drivers' protocols.
 */
import { appendFileSync, chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HealthReport, PUBLIC_HEALTH_CACHE_MS } from "../contract/health.ts";
import { REQUEST_ID_HEADER, SHARED_ALIAS } from "../contract/limits.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { CreatedKey } from "../contract/keys.ts";
import { startStack, type Stack } from "../local/stack.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { setSettings } from "../ops/accounts.ts";
import { scanLogs } from "./support/global-stack.ts";

let stack: Stack;
let dataDir: string;

let ledger: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "svc-stack-"));
  chmodSync(dataDir, 0o711);
  stack = await startStack({ dataDir, log: () => {} });
  ledger = join(dataDir, "secrets-used.txt");
  writeFileSync(ledger, Object.values(stack.secrets).join("\n") + "\n");
});

afterAll(async () => {
  await stack?.stop();
  try {
    if (stack) expect(scanLogs(dataDir, ledger)).toEqual([]);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** A new account on this stack: a user signed in at its identity provider, with one key. */
async function keyOfNewAccount(login: string): Promise<CreatedKey> {
  const token = await getUserAccessToken({ issuer: stack.idp.issuer, login });
  appendFileSync(ledger, `${token}\n`);
  const res = await fetch(`${stack.baseUrl}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "outage" }),
  });
  const key = CreatedKey.parse(await res.json());
  appendFileSync(ledger, `${key.secret}\n`);
  return key;
}

function listModels(key: CreatedKey): Promise<Response> {
  return fetch(`${stack.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key.secret}` } });
}

/**
 * When this file last had an answer from /health. The edge reuses a report until
 * PUBLIC_HEALTH_CACHE_MS after its probe started, which was before that answer; only this file asks
 * this stack.
 */
let lastAnswerAt = 0;

/** Until no report this file has been given can be reused (with room for workerd's clock, which moves at I/O). */
async function reportsExpired(): Promise<void> {
  const wait = lastAnswerAt + PUBLIC_HEALTH_CACHE_MS + 200 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

async function askHealth(authorization?: string): Promise<Response> {
  const res = await fetch(`${stack.baseUrl}/health`, authorization ? { headers: { authorization } } : {});
  lastAnswerAt = Date.now();
  return res;
}

/** The operator's health report (the metrics secret as a bearer token), probed after every change made before the call. */
async function health(): Promise<{ status: number; body: HealthReport & Partial<ErrorEnvelope>; requestId: string | null }> {
  await reportsExpired();
  const res = await askHealth(`Bearer ${stack.secrets.metrics}`);
  return { status: res.status, body: (await res.json()) as HealthReport & Partial<ErrorEnvelope>, requestId: res.headers.get(REQUEST_ID_HEADER) };
}

/** What anyone is told (from a report that may be a few seconds old). */
async function publicHealth(authorization?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await askHealth(authorization);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** How many health reports the stack's sidecar has given: one per probe of the edge's. */
async function sidecarReports(): Promise<number> {
  const res = await fetch(`${stack.urls.sidecar}/metrics`, { headers: { authorization: `Bearer ${stack.secrets.metrics}` } });
  expect(res.status).toBe(200);
  const line = /^svc_health_reports_total (\d+)$/m.exec(await res.text());
  expect(line).not.toBeNull();
  return Number(line![1]);
}

const EXPECTED_LINKS = ["edge->postgres", "edge->redis", "edge->r2", "edge->sidecar", "sidecar->postgres"];

describe("local stack", () => {
  it("registers the runtime's release under the shared alias", async () => {
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query("SELECT id, fingerprint, aliases, url, token_env FROM model_registry");
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        id: stack.release.release_id,
        fingerprint: stack.release.fingerprint,
        aliases: [SHARED_ALIAS],
        url: stack.urls.runtime,
        token_env: "SVC_RUNTIME_SECRET",
      });
    } finally {
      await db.end();
    }
  });

  it("reports every link up, each with a latency, and carries a request id", async () => {
    const { status, body, requestId } = await health();
    expect(status).toBe(200);
    expect(HealthReport.parse(body).status).toBe("ok");
    const names = body.links.map((link) => link.name);
    expect(names).toEqual([...EXPECTED_LINKS, `sidecar->runtime ${stack.release.release_id}`]);
    for (const link of body.links) {
      expect(link.ok, `${link.name}: ${link.error}`).toBe(true);
      expect(link.latency_ms).toBeGreaterThanOrEqual(0);
    }
    expect(body.links.at(-1)?.detail).toContain(stack.release.fingerprint.slice(0, 12));
    // Which engine build serves (runtime/gpu-probe.ts), and why not the others.
    expect(body.links.at(-1)?.detail).toMatch(/, engine node-llama-cpp \d+\.\d+\.\d+, (cpu|cuda|vulkan) \((prebuilt|local build)/);
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/);
  });

  it("tells anyone only whether it is up, the same for a wrong secret or the sidecar secret, and writes nothing to storage", async () => {
    // The sidecar secret signs storage grants for every tenant's objects: a monitor never needs it.
    const presented = [undefined, "Bearer nope", `Bearer ${stack.secrets.storage}`, `Bearer ${stack.secrets.sidecar}`];
    for (const [i, authorization] of presented.entries()) {
      const { status, body } = await publicHealth(authorization);
      expect([status, body], `authorization #${i}`).toEqual([200, { status: "ok" }]);
    }
    expect((await health()).status).toBe(200);
    // The local R2 store (its index and blobs under the data folder) holds no probe object: storage is proven by a read.
    const files = readdirSync(join(dataDir, "wrangler"), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
    expect(files.length).toBeGreaterThan(0);
    expect(files.filter((entry) => readFileSync(join(entry.parentPath, entry.name)).includes("health/probe")).map((entry) => entry.name)).toEqual([]);
  });

  it("probes the links once for many requests at once, public and the operator's alike, and reuses the report for the cache period", async () => {
    await reportsExpired();
    const before = await sidecarReports();
    const operator = `Bearer ${stack.secrets.metrics}`;
    const asked = [undefined, operator, undefined, `Bearer ${stack.secrets.sidecar}`, operator, "Bearer nope", undefined, operator];
    const sentAt = Date.now();
    const answers = await Promise.all(asked.map(async (authorization) => ({ authorization, res: await askHealth(authorization) })));
    // The sidecar was asked for its links once: one probe for all of them.
    expect((await sidecarReports()) - before).toBe(1);
    const reports = new Set<string>();
    for (const { authorization, res } of answers) {
      expect(res.status).toBe(200);
      const body = (await res.json()) as Record<string, unknown>;
      if (authorization === operator) reports.add(JSON.stringify(HealthReport.parse(body)));
      else expect(body).toEqual({ status: "ok" });
    }
    // The operator's answers are that one report, latencies and all.
    expect(reports.size).toBe(1);
    // Asked again within the period (the premise checked below), the operator is given that report again.
    const again = await askHealth(operator);
    expect(JSON.stringify(HealthReport.parse(await again.json()))).toBe([...reports][0]);
    expect(Date.now() - sentAt).toBeLessThan(PUBLIC_HEALTH_CACHE_MS);
    expect((await sidecarReports()) - before).toBe(1);
  });

  it("answers unknown routes with the error envelope and a request id", async () => {
    const res = await fetch(`${stack.baseUrl}/v1/nothing-here`);
    expect(res.status).toBe(404);
    expect(ErrorEnvelope.parse(await res.json()).error.code).toBe("not_found");
    expect(res.headers.get(REQUEST_ID_HEADER)).toMatch(/^req_/);
  });

  it("keeps the sidecar closed to callers without its secret", async () => {
    const none = await fetch(`${stack.urls.sidecar}/internal/health`);
    const wrong = await fetch(`${stack.urls.sidecar}/internal/health`, { headers: { authorization: "Bearer nope" } });
    expect([none.status, wrong.status]).toEqual([401, 401]);
  });

  it("reports a runtime whose identity differs from the registry as down, naming the link", async () => {
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    try {
      // A second release of the same sidecar, pointing at the same runtime: the runtime serves another identity.
      await db.query(
        `INSERT INTO model_releases (id, fingerprint, url, token_env, release_date, sidecar_url) VALUES ('impostor', $1, $2, 'SVC_RUNTIME_SECRET', '2026-01-01', $3)`,
        ["0".repeat(64), stack.urls.runtime, stack.urls.sidecar],
      );
      const { status, body } = await health();
      expect(status).toBe(503);
      // Anyone sees the service down (from the same report), and nothing of which link or release.
      const seen = await publicHealth();
      expect(seen.status).toBe(503);
      expect(JSON.stringify(seen.body)).not.toMatch(/impostor|sidecar|runtime|links/);
      const impostor = body.links.find((link) => link.name === "sidecar->runtime impostor");
      expect(impostor).toMatchObject({ ok: false });
      expect(impostor?.error).toMatch(/identity mismatch/);
      expect(body.error?.code).toBe("unavailable");
      expect(body.error?.message).toContain("sidecar->runtime impostor");
    } finally {
      await db.query("DELETE FROM model_releases WHERE id = 'impostor'");
      await db.end();
    }
    expect((await health()).status).toBe(200);
  });

  it("refuses to change a release's fingerprint", async () => {
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    try {
      await expect(
        db.query("UPDATE model_releases SET fingerprint = $1 WHERE id = $2", ["f".repeat(64), stack.release.release_id]),
      ).rejects.toThrow(/immutable/);
    } finally {
      await db.end();
    }
  });

  it("says which link is down when the runtime stops", async () => {
    const runtime = stack.children.find((child) => child.name === "runtime");
    await runtime?.stop();
    const { status, body } = await health();
    expect(status).toBe(503);
    const down = body.links.filter((link) => !link.ok).map((link) => link.name);
    expect(down).toEqual([`sidecar->runtime ${stack.release.release_id}`]);
    expect(body.error?.message).toMatch(/runtime unreachable/);
  });

  it("says which link is down when the sidecar stops", async () => {
    const sidecar = stack.children.find((child) => child.name === "sidecar");
    await sidecar?.stop();
    const { status, body } = await health();
    expect(status).toBe(503);
    expect(body.links.filter((link) => !link.ok).map((link) => link.name)).toEqual(["edge->sidecar"]);
  });

  it("refuses a metered account while Redis is down, and serves an unmetered one", async () => {
    const metered = await keyOfNewAccount("metered");
    const unmetered = await keyOfNewAccount("unmetered");
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    try {
      await setSettings(db, "metered", { requests_per_second: 100 });
    } finally {
      await db.end();
    }
    expect((await listModels(metered)).status).toBe(200);

    await stack.stopService("redis");
    const refused = await listModels(metered);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(ErrorEnvelope.parse(await refused.json()).error.code).toBe("quota_unavailable");
    expect((await listModels(unmetered)).status).toBe(200);
    const { body } = await health();
    expect(body.links.find((link) => link.name === "edge->redis")).toMatchObject({ ok: false });
  });

  it("says which links are down when Postgres stops", async () => {
    await stack.stopService("postgres");
    const { status, body } = await health();
    expect(status).toBe(503);
    const down = body.links.filter((link) => !link.ok).map((link) => link.name);
    expect(down).toContain("edge->postgres");
    expect(body.links.find((link) => link.name === "edge->r2")).toMatchObject({ ok: true });
  });
});
