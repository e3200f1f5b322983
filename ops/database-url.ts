/**
 * The database an operator command works on (DATABASE_URL, else the running `npm start` stack's),
 * and the frame every operator command runs in: connect, run, print a failure as one line, exit 2.
 */
import pg from "pg";
import { runningStack } from "../local/running.ts";

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL ?? runningStack()?.databaseUrl;
  if (!url) throw new Error("set DATABASE_URL, or start the local stack with npm start");
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
