/**
 * Runs an operator command against the local stack (developer machine only): with DATABASE_URL unset,
 * it points the command at the database of the running `npm start` stack, and gives it the local
 * runtime's secret (for `registry calibrate`) unless the variable is set.
 *
 *     bun local/operator.ts ops/accounts.ts show dev-user      (what `npm run account -- show dev-user` runs)
 */
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { runningStack } from "./running.ts";

const [script, ...args] = process.argv.slice(2);
if (!script) {
  console.error("usage: bun local/operator.ts <ops/command.ts> [arguments...]");
  process.exit(2);
}
const stack = runningStack();
const databaseUrl = process.env.DATABASE_URL ?? stack?.databaseUrl;
const env = { ...(process.env.DATABASE_URL ? {} : stack?.runtimeSecrets), ...process.env, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) };
const result = spawnSync(process.execPath, [resolve(script), ...args], { stdio: "inherit", env });
process.exit(result.status ?? 2);
