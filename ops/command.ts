/**
 * The frame every operator command runs in (on an operator's machine, against DATABASE_URL): connect,
 * run, print a failure as one line, exit 2. Locally, `npm run account` and friends go through
 * local/operator.ts, which points DATABASE_URL at the running `npm start` stack when it is unset.
 */
import pg from "pg";

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("set DATABASE_URL to the service's Postgres (locally: start the stack with npm start)");
  return url;
}

/** Runs `command` with a connected client and exits with its status (2 when it throws). */
export async function runOperatorCommand(command: (db: pg.Client) => Promise<number>): Promise<never> {
  let status = 2;
  try {
    const db = new pg.Client({ connectionString: databaseUrl() });
    await db.connect();
    try {
      status = await command(db);
    } finally {
      await db.end();
    }
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
  }
  process.exit(status);
}
