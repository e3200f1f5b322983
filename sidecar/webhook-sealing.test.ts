/**
 * The sweep that seals endpoints' secrets under the current key (sidecar/webhook-sealing.ts), through
 * the sidecar's driver, on a scratch database of the shared stack's Postgres built by
 * `npm run db:migrate`: a sweep under keys the stack's sidecar does not hold would leave the shared
 * endpoints unreadable to it. The stack's own sidecar sealing a plain row at start, and delivering
 * with it, is in test/webhook-secrets.test.ts.
 */
import { Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { newWebhookSecret } from "../contract/webhook-signature.ts";
import { migrate } from "../ops/migrate.ts";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { parseSecretList } from "../server-shared/secret-list.ts";
import { webhookKeyring, type WebhookKeyring } from "../server-shared/webhook-secrets.ts";
import { query, stack } from "../test/support/api.ts";
import { SecretSealer } from "./webhook-sealing.ts";

const newKey = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
const keys = (...list: string[]) => webhookKeyring(parseSecretList(list.join(",")));
const [OLD, NEW, ELSEWHERE] = [newKey(), newKey(), newKey()];

const database = `sealing_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
let pool: Pool;
let accountId: string;

beforeAll(async () => {
  await query(`CREATE DATABASE ${database}`);
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${database}`;
  await migrate(url.toString());
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: url.toString(), max: 2 });
  const { rows } = await pool.query("INSERT INTO accounts (idp_issuer, idp_subject) VALUES ('https://idp.test/', 'sealing') RETURNING id");
  accountId = (rows[0] as { id: string }).id;
});

afterAll(async () => {
  await pool?.end();
  await query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
});

interface Row {
  id: string;
  secret: string;
  previous_secret: string | null;
}

/** An endpoint whose columns hold what the case needs; its id. */
async function endpointStoring(id: string, secret: string, previous: string | null = null): Promise<string> {
  await pool.query(
    `INSERT INTO webhook_endpoints (id, account_id, url, events, secret, previous_secret, previous_secret_until)
     VALUES ($1, $2, 'https://hooks.example.com/in', '{batch.completed}', $3, $4, CASE WHEN $4::text IS NULL THEN NULL ELSE now() + interval '1 day' END)`,
    [id, accountId, secret, previous],
  );
  return id;
}

async function stored(id: string): Promise<Row> {
  const { rows } = await pool.query("SELECT id, secret, previous_secret FROM webhook_endpoints WHERE id = $1", [id]);
  return rows[0] as Row;
}

const sealer = (ring: () => Promise<WebhookKeyring>, log: string[]) => new SecretSealer({ pool, keyring: ring, log: (line) => log.push(line) });

describe("the sweep of webhook secrets", () => {
  it("seals under the current key the plain secrets of before and those under an older key, each still the same secret; a second sweep changes nothing", async () => {
    const before = await keys(OLD);
    const after = await keys(NEW, OLD);
    const plain = [newWebhookSecret(), newWebhookSecret()];
    const underOld = newWebhookSecret();
    const halfDone = [newWebhookSecret(), newWebhookSecret()];
    const done = newWebhookSecret();
    const ids = Array.from({ length: 4 }, () => crypto.randomUUID());
    await endpointStoring(ids[0]!, plain[0]!, plain[1]!);
    await endpointStoring(ids[1]!, await before.seal(ids[1]!, underOld));
    await endpointStoring(ids[2]!, await after.seal(ids[2]!, halfDone[0]!), halfDone[1]!);
    await endpointStoring(ids[3]!, await after.seal(ids[3]!, done));
    const [halfDoneBefore, untouched] = [await stored(ids[2]!), await stored(ids[3]!)];

    const log: string[] = [];
    expect(await sealer(() => keys(NEW, OLD), log).sweep()).toEqual({ sealed: 3, unreadable: 0 });
    const rows = await Promise.all(ids.map(stored));
    for (const row of rows) {
      for (const value of [row.secret, row.previous_secret].filter((v) => v !== null)) expect(value!.startsWith(after.sealedPrefix), value!).toBe(true);
    }
    const secrets = [...plain, underOld, ...halfDone, done];
    const everything = JSON.stringify(rows) + log.join("\n");
    for (const secret of secrets) expect(everything).not.toContain(secret.slice("whsec_".length));
    // The new key alone opens every one of them to what it was.
    const newOnly = await keys(NEW);
    expect(await newOnly.open(ids[0]!, rows[0]!.secret)).toBe(plain[0]);
    expect(await newOnly.open(ids[0]!, rows[0]!.previous_secret!)).toBe(plain[1]);
    expect(await newOnly.open(ids[1]!, rows[1]!.secret)).toBe(underOld);
    expect(rows[1]!.previous_secret).toBeNull();
    expect(await newOnly.open(ids[2]!, rows[2]!.previous_secret!)).toBe(halfDone[1]);
    // A secret under the current key already is kept as it is.
    expect(rows[2]!.secret).toBe(halfDoneBefore.secret);
    expect(rows[3]).toEqual(untouched);
    expect(log).toEqual([`sidecar: webhook secrets: 3 endpoints sealed under key ${after.currentId}; 0 sealed under a key WEBHOOK_SECRET_KEY does not hold`]);

    expect(await sealer(() => keys(NEW, OLD), log).sweep()).toEqual({ sealed: 0, unreadable: 0 });
    expect(await Promise.all(ids.map(stored))).toEqual(rows);
    expect(log).toHaveLength(1);
  });

  it("leaves a secret under a key it does not hold as it is, and says so by the key's id", async () => {
    const id = crypto.randomUUID();
    await endpointStoring(id, await (await keys(ELSEWHERE)).seal(id, newWebhookSecret()));
    const before = await stored(id);
    const log: string[] = [];
    expect(await sealer(() => keys(NEW), log).sweep()).toEqual({ sealed: 0, unreadable: 1 });
    expect(await stored(id)).toEqual(before);
    expect(log).toEqual([`sidecar: webhook secrets: 0 endpoints sealed under key ${(await keys(NEW)).currentId}; 1 sealed under a key WEBHOOK_SECRET_KEY does not hold`]);
  });
});
