/**
 * `npm run bench:neon`: one small parameterised query through the Neon driver's WebSocket client, as
 * the sidecar makes its key confirmations, usage rows and bulk commits, with the service's setting
 * (server-shared/neon-route.ts: each write sent at once) against the driver's default (a query's
 * messages held for a setTimeout(0), which Bun clamps to a millisecond), and node-postgres over TCP
 * as the floor. A private embedded Postgres and the local Neon bridge (in this process); the three
 * clients run interleaved, round by round, so that all see the same machine state. Settings: QUERIES
 * (per client, default 500).
 *
 * Figures of 2026-11-27 (this 2-core machine; `npm run bench:neon`, three runs), median per query:
 * the service's setting 0.307-0.313 ms, the driver's default 1.331-1.361 ms (4.3 times), node-postgres
 * over TCP 0.190-0.234 ms.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@neondatabase/serverless";
import pg from "pg";
import { startNeonBridge } from "../local/neon-bridge.ts";
import { startPostgres } from "../local/postgres.ts";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";

const queries = Number(process.env.QUERIES ?? 500);
const dir = mkdtempSync(join(tmpdir(), "bench-neon-"));
chmodSync(dir, 0o711); // as root, Postgres runs as user postgres, which must enter it
const postgres = await startPostgres({ dataDir: join(dir, "postgres") });
const bridge = await startNeonBridge({ databaseUrl: postgres.url });

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

try {
  useNeonRoute(neonRoute(bridge.connectionString, `127.0.0.1:${bridge.port}`));
  const service = new Client({ connectionString: bridge.connectionString });
  const driverDefault = new Client({ connectionString: bridge.connectionString });
  driverDefault.neonConfig.coalesceWrites = true;
  const tcp = new pg.Client({ connectionString: postgres.url });
  const clients = [
    { name: "Neon driver, each write at once (the service)", client: service, samples: [] as number[] },
    { name: "Neon driver, writes held for a timer (its default)", client: driverDefault, samples: [] as number[] },
    { name: "node-postgres over TCP (the floor)", client: tcp, samples: [] as number[] },
  ];
  for (const { client } of clients) await client.connect();
  for (let i = 0; i < queries + 20; i++) {
    for (let j = 0; j < clients.length; j++) {
      const { client, samples } = clients[(i + j) % clients.length]!;
      const started = performance.now();
      const { rows } = await (client as pg.Client).query<{ n: number }>("SELECT $1::int + 1 AS n", [i]);
      const took = performance.now() - started;
      if (rows[0]?.n !== i + 1) throw new Error("wrong answer");
      if (i >= 20) samples.push(took); // the first rounds warm the connections up
    }
  }
  for (const { client } of clients) await client.end();
  const floor = median(clients[2]!.samples);
  console.log(`one parameterised query, ${queries} per client, interleaved, median (ms), ${new Date().toISOString()}`);
  for (const { name, samples } of clients) console.log(`${name.padEnd(52)} ${median(samples).toFixed(3).padStart(7)}   ${(median(samples) / floor).toFixed(1).padStart(5)} x the floor`);
  console.log(`the driver's default / the service's setting: ${(median(clients[1]!.samples) / median(clients[0]!.samples)).toFixed(1)}`);
} finally {
  await bridge.stop();
  await postgres.stop();
  rmSync(dir, { recursive: true, force: true });
}
