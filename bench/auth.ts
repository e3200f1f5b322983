/**
 * `npm run bench:auth`: latency of API-key verification and quota admission at a fixed request rate
 * on loopback, against an unauthenticated route of the same Worker as the baseline, all measured in
 * one run on an isolated stack. Settings: RATE (requests/s, default 50), SECONDS (per route, default 10).
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { CreatedKey } from "../contract/keys.ts";
import { startStack } from "../local/stack.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { setSettings } from "../ops/accounts.ts";
import { fixedRate, printResults } from "./load.ts";

const rate = Number(process.env.RATE ?? 50);
const seconds = Number(process.env.SECONDS ?? 10);
const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
chmodSync(dataDir, 0o711);
const stack = await startStack({ dataDir, log: () => {} });

try {
  async function key(login: string): Promise<string> {
    const token = await getUserAccessToken({ issuer: stack.idp.issuer, login });
    const res = await fetch(`${stack.baseUrl}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "bench" }),
    });
    return CreatedKey.parse(await res.json()).secret;
  }
  const unmetered = await key("bench-unmetered");
  const metered = await key("bench-metered");
  const db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  // Quotas far above the offered load: every request runs the admission script and is admitted.
  await setSettings(db, "bench-metered", { requests_per_second: 100_000, tokens_per_second: 1_000_000_000 });
  await db.end();

  const get = (path: string, secret?: string) => () =>
    fetch(`${stack.baseUrl}${path}`, { headers: secret ? { authorization: `Bearer ${secret}` } : {} });
  // Warm every path once so that the figures are steady-state.
  for (const send of [get("/"), get("/v1/models", unmetered), get("/v1/models", metered)]) await (await send()).arrayBuffer();

  console.log(`fixed rate ${rate} requests/s for ${seconds} s per route, loopback, ${new Date().toISOString()}`);
  const baseline = await fixedRate("GET / (no auth, no I/O): baseline", rate, seconds, get("/"));
  const keyOnly = await fixedRate("GET /v1/models, key (no quota)", rate, seconds, get("/v1/models", unmetered));
  const withQuota = await fixedRate("GET /v1/models, key + quota admission", rate, seconds, get("/v1/models", metered));
  printResults([baseline, keyOnly, withQuota], baseline);
  console.log(`quota admission adds p50 ${(withQuota.p50 - keyOnly.p50).toFixed(2)} ms, p99 ${(withQuota.p99 - keyOnly.p99).toFixed(2)} ms`);
} finally {
  await stack.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
