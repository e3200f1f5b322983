/**
 * Entry of the local protocol bridges (`bun local/bridges-main.ts`, started by local/bridges.ts; runs
 * on a developer machine or in tests, never in production): the Neon bridge and the Upstash bridge in
 * a process of their own, as Neon's and Upstash's endpoints are services of their own in production,
 * so that the launcher, a test runner or a benchmark's load generator does not share their event loop.
 *
 * Settings: BRIDGES_DATABASE_URL (empty: no Neon bridge, for a remote database that is Neon itself),
 * BRIDGES_REDIS_URL, BRIDGES_UPSTASH_TOKEN. Prints `BRIDGES READY {"neonPort":…|null,"upstashUrl":"…"}`
 * once they listen; SIGTERM stops them.
 */
import { startNeonBridge } from "./neon-bridge.ts";
import { startUpstashBridge } from "./upstash-bridge.ts";

const databaseUrl = process.env.BRIDGES_DATABASE_URL;
const redisUrl = process.env.BRIDGES_REDIS_URL;
const token = process.env.BRIDGES_UPSTASH_TOKEN;
if (databaseUrl === undefined || !redisUrl || !token) {
  console.error("BRIDGES_DATABASE_URL (empty for none), BRIDGES_REDIS_URL and BRIDGES_UPSTASH_TOKEN must be set");
  process.exit(2);
}

const [neon, upstash] = await Promise.all([databaseUrl ? startNeonBridge({ databaseUrl }) : null, startUpstashBridge({ redisUrl, token })]);
console.log(`BRIDGES READY ${JSON.stringify({ neonPort: neon?.port ?? null, upstashUrl: upstash.url })}`);

const stop = async () => {
  await Promise.allSettled([neon?.stop(), upstash.stop()]);
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
