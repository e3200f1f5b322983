/** The database an operator command works on: DATABASE_URL, else the running `npm start` stack's. */
import { runningStack } from "../local/running.ts";

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL ?? runningStack()?.databaseUrl;
  if (!url) throw new Error("set DATABASE_URL, or start the local stack with npm start");
  return url;
}
