/**
 * The GPU host's processes under their service manager's signals, against real processes: SIGHUP
 * makes the runtime and the sidecar read their secret files again, so both secrets are rotated by
 * the steps docs/deploy.md gives while decisions keep answering (no restart, no refused call); and
 * SIGTERM drains the sidecar: a real-time call it has taken answers, the bulk step in flight commits,
 * and no lease is renewed after the signal.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUNTIME_PATHS } from "../server-shared/runtime-protocol.ts";
import { SIDECAR_PATHS, type ResolvedRelease } from "../server-shared/sidecar-protocol.ts";
import { ensureModel } from "../local/model.ts";
import type { Child } from "../local/process.ts";
import { sidecarAddress, startRuntime, startSidecar, type StartedRuntime } from "../local/tiers.ts";
import { registerRelease, retireRelease } from "../ops/releases.ts";
import { call, newAccount, query, remember, stack, withDb } from "./support/api.ts";
import { lines, submitted } from "./support/bulk.ts";

const RELEASE = `signals-${randomBytes(4).toString("hex")}`;
const secret = (name: string) => remember(`${name}-${randomBytes(24).toString("base64url")}`);
const dir = mkdtempSync(join(tmpdir(), "svc-signals-"));
const files = { runtime: join(dir, "runtime-secret"), sidecarRuntime: join(dir, "sidecar-runtime-secret"), sidecar: join(dir, "sidecar-secret") };
const write = (path: string, value: string) => writeFileSync(path, `${value}\n`, { mode: 0o600 });

let runtime: StartedRuntime;
let sidecar: Child;
let sidecarUrl: string;
let account: Awaited<ReturnType<typeof newAccount>>;
let release: ResolvedRelease;

async function startTheSidecar(name: string): Promise<Child> {
  const address = new URL(sidecarUrl);
  return startSidecar({
    name,
    address: { port: Number(address.port), url: sidecarUrl },
    secret: "",
    database: { DATABASE_URL: stack().databaseUrl, NEON_LOCAL_BRIDGE: stack().neonBridge },
    runtimeSecrets: { SIGNALS_RUNTIME_SECRET_FILE: files.sidecarRuntime },
    edgeUrl: stack().baseUrl,
    upstash: { url: stack().upstashUrl, token: stack().secrets.upstash },
    webhookKey: stack().secrets.webhookKey,
    // A short renewal period, so that a lease renewed during the drain would show.
    extraEnv: { SIDECAR_SECRET_FILE: files.sidecar, SIDECAR_DRAIN_MS: "20000", SVC_TEST_JOB_LEASE_MS: "20000", SVC_TEST_JOB_RENEW_MS: "50" },
    logDir: stack().logDir,
  });
}

beforeAll(async () => {
  account = await newAccount();
  const runtimeSecret = secret("rt-first");
  const sidecarSecret = secret("sc-first");
  write(files.runtime, runtimeSecret);
  write(files.sidecarRuntime, runtimeSecret);
  write(files.sidecar, sidecarSecret);
  edgeSends = sidecarSecret;
  runtime = await startRuntime({
    name: "runtime-signals",
    modelPath: (await ensureModel()).path,
    secret: "",
    logDir: stack().logDir,
    env: { RUNTIME_RELEASE_ID: RELEASE, RUNTIME_SECRET_FILE: files.runtime },
  });
  sidecarUrl = (await sidecarAddress()).url;
  await withDb((db) =>
    registerRelease(db, {
      id: RELEASE,
      fingerprint: runtime.ready.fingerprint,
      url: runtime.url,
      token_env: "SIGNALS_RUNTIME_SECRET",
      release_date: "2026-11-22",
      description: "signals test",
      owners: [account.accountId],
      sidecar_url: sidecarUrl,
    }),
  );
  release = (await query<ResolvedRelease>("SELECT id, fingerprint, revision::int AS revision FROM model_releases WHERE id = $1", [RELEASE]))[0]!;
  sidecar = await startTheSidecar("sidecar-signals");
});

afterAll(async () => {
  await sidecar?.stop();
  await runtime?.child.stop();
  await withDb((db) => retireRelease(db, RELEASE)).catch(() => undefined);
});

/** The secret "the edge" (this test) sends to the sidecar. */
let edgeSends = "";
const ticket = { state: "The invoice was charged twice.", questions: { money: { type: "noul", instructions: "Is this about money?" } } };

/** A decide call straight to the sidecar, as the edge makes it. */
function decide(requestId = `req_signals_${randomBytes(4).toString("hex")}`): Promise<Response> {
  return fetch(`${sidecarUrl}${SIDECAR_PATHS.decide}`, {
    method: "POST",
    headers: { authorization: `Bearer ${edgeSends}`, "content-type": "application/json" },
    body: JSON.stringify({ release, request: ticket, account_id: account.accountId, key_id: account.key.id, request_id: requestId }),
  });
}

/** Sends SIGHUP and waits until the process says it read its secrets again (its `n`-th time). */
async function reload(child: Child, tier: "runtime" | "sidecar", n: number): Promise<void> {
  process.kill(-child.proc.pid!, "SIGHUP");
  const line = `${tier}: secrets read again`;
  for (let waited = 0; readFileSync(child.logPath, "utf8").split(line).length - 1 < n; waited += 20) {
    if (waited > 10_000) throw new Error(`${tier} did not reload its secrets`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const runtimeStatus = async (presented: string) =>
  (await fetch(`${runtime.url}${RUNTIME_PATHS.identity}`, { headers: { authorization: `Bearer ${presented}` } })).status;
const sidecarStatus = async (presented: string) =>
  (await fetch(`${sidecarUrl}${SIDECAR_PATHS.health}`, { headers: { authorization: `Bearer ${presented}` } })).status;

describe("SIGHUP: secrets rotated without a restart", () => {
  it("rotates the runtime secret and the sidecar secret step by step while every decision answers", async () => {
    const statuses: number[] = [];
    let traffic = true;
    const load = (async () => {
      while (traffic) statuses.push((await decide()).status);
    })();
    const pids = [runtime.child.proc.pid, sidecar.proc.pid];
    try {
      // Runtime secret: the runtime accepts both, the sidecar sends the new one, the runtime drops the old.
      const oldRuntime = readFileSync(files.runtime, "utf8").trim();
      const newRuntime = secret("rt-second");
      write(files.runtime, `${newRuntime},${oldRuntime}`);
      await reload(runtime.child, "runtime", 1);
      expect([await runtimeStatus(oldRuntime), await runtimeStatus(newRuntime)]).toEqual([200, 200]);
      write(files.sidecarRuntime, newRuntime);
      await reload(sidecar, "sidecar", 1);
      write(files.runtime, newRuntime);
      await reload(runtime.child, "runtime", 2);
      expect([await runtimeStatus(oldRuntime), await runtimeStatus(newRuntime)]).toEqual([401, 200]);

      // Sidecar secret: the sidecar accepts both (still sending the old), the edge sends the new, the sidecar drops the old.
      const oldSidecar = edgeSends;
      const newSidecar = secret("sc-second");
      write(files.sidecar, `${oldSidecar},${newSidecar}`);
      await reload(sidecar, "sidecar", 2);
      edgeSends = newSidecar;
      write(files.sidecar, newSidecar);
      await reload(sidecar, "sidecar", 3);
      expect([await sidecarStatus(oldSidecar), await sidecarStatus(newSidecar)]).toEqual([401, 200]);
      // A few more decisions on the rotated secrets.
      for (const target = statuses.length + 3; statuses.length < target; ) await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      traffic = false;
      await load;
    }
    expect(statuses.length).toBeGreaterThan(2);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // Neither process was restarted.
    expect([runtime.child.proc.pid, sidecar.proc.pid]).toEqual(pids);
    expect(runtime.child.proc.exitCode).toBeNull();
  }, 120_000);

  it("keeps the previous secret when the file cannot be read, and says so", async () => {
    const current = readFileSync(files.sidecar, "utf8").trim();
    write(files.sidecar, "");
    process.kill(-sidecar.proc.pid!, "SIGHUP");
    for (let waited = 0; !readFileSync(sidecar.logPath, "utf8").includes("sidecar: could not read SIDECAR_SECRET again; kept the previous value"); waited += 20) {
      if (waited > 10_000) throw new Error("no line about the unreadable secret");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await sidecarStatus(current)).toBe(200);
    write(files.sidecar, current);
  });
});

describe("SIGTERM: the sidecar drains", () => {
  it("answers the call it has taken, commits the bulk step in flight, renews no lease, and releases its batch", async () => {
    // Records of three questions over a long state of their own, so that a step lasts long enough to
    // be renewed often and to be still in flight at the signal below (a short state shared by every
    // record was kept evaluated, and a step could end within the 100 ms the real-time call is given).
    const questions = { a: { type: "noul", instructions: "Is this about money?" }, b: { type: "noul", instructions: "Is it urgent?" }, c: { type: "noul", instructions: "Is it a bug?" } };
    const state = (i: number) => `${ticket.state} ${"The customer wrote again about the same charge on the card. ".repeat(25)}(message ${i})`;
    const batchId = await submitted(account, lines(Array.from({ length: 12 }, (_, i) => ({ custom_id: `r${i}`, body: { model: RELEASE, state: state(i), questions } }))));
    const committed = async () => Number((await query<{ n: string }>("SELECT count(*) AS n FROM batch_results WHERE batch_id = $1", [batchId]))[0]!.n);
    // The signal comes right after a commit, when the next step has just begun.
    for (let waited = 0, first = -1; ; waited += 10) {
      const n = await committed();
      if (first === -1 && n >= 1) first = n;
      if (first !== -1 && n > first) break;
      if (waited > 120_000) throw new Error("the batch did not run");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // A real-time call waiting in the lane behind the bulk step (the lane holds one waiting call).
    const calls = [decide()];
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = await committed();
    let running = true;
    const exited = new Promise<number | null>((resolve) => sidecar.proc.once("exit", (code) => resolve(code))).finally(() => (running = false));
    process.kill(-sidecar.proc.pid!, "SIGTERM");
    // The batch's lease while the sidecar drains: every distinct expiry seen until it exits.
    const expiries = new Set<number>();
    const watch = (async () => {
      while (running) {
        const [row] = await query<{ lease_expires_at: Date | null }>("SELECT lease_expires_at FROM batches WHERE id = $1", [batchId]);
        if (row?.lease_expires_at) expiries.add(row.lease_expires_at.getTime());
      }
    })();

    expect((await Promise.all(calls)).map((res) => res.status)).toEqual([200]);
    expect(await exited).toBe(0);
    await watch;
    const after = await committed();
    // The step in flight at the signal committed; nothing ran twice.
    expect(after).toBeGreaterThan(before);
    const duplicates = await query("SELECT line FROM batch_results WHERE batch_id = $1 GROUP BY line HAVING count(*) > 1", [batchId]);
    expect(duplicates).toEqual([]);
    const [batch] = await query<{ lease_token: string | null; lease_expires_at: Date | null; status: string }>(
      "SELECT lease_token, lease_expires_at, status FROM batches WHERE id = $1",
      [batchId],
    );
    expect(batch).toMatchObject({ lease_token: null, lease_expires_at: null, status: "running" });
    expect(readFileSync(sidecar.logPath, "utf8")).toContain("sidecar: stopping; draining for at most 20000 ms");
    // Renewed every 50 ms, the lease would have had a new expiry several times over while the bulk
    // step and the real-time call finished; at most one renewal may race the signal itself.
    expect(expiries.size).toBeLessThanOrEqual(2);

    // A sidecar started again at the same address finishes the batch.
    sidecar = await startTheSidecar("sidecar-signals-again");
    for (let waited = 0; (await committed()) < 12; waited += 250) {
      if (waited > 120_000) throw new Error("the batch did not finish after the restart");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const reply = await call<{ status: string; request_counts: { completed: number } }>(`/v1/batches/${batchId}`, { token: account.key.secret });
    expect(reply.body.request_counts.completed).toBe(12);
  }, 240_000);
});
