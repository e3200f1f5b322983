/**
 * Helpers for the SDK's tests (runs only in tests): a fetch that records what a client sent, the
 * rejection of a promise, the SDK's settings variables set for one step, and a batch finished
 * straight in the database with committed results (for paging and retention, where the worker's
 * speed is beside the point).
 */
import type { Fetch } from "../../clients/sdk-ts/src/index.ts";
import { withDb } from "./api.ts";

/** The variables the SDK reads, and the command-line tool's, which it must not. */
export const SETTINGS = ["SVC_API_KEY", "SVC_ACCESS_TOKEN", "SVC_BASE_URL", "SVC_DEFAULT_MODEL", "SVC_WEBHOOK_SECRET", "SVC_CONFIG_PATH"];

export interface Sent {
  method: string;
  url: string;
  headers: Headers;
  /** The request body when it was text (JSON); undefined otherwise. */
  body: string | undefined;
  status: number;
  responseHeaders: Headers;
  startedAt: number;
  endedAt: number;
}

/** The global fetch, with a record of every request the client sent and what came back. */
export function recordingFetch(): { fetch: Fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const recorder: Fetch = async (input, init) => {
    const startedAt = Date.now();
    const res = await fetch(input, init);
    sent.push({
      method: init?.method ?? "GET",
      url: String(input),
      headers: new Headers(init?.headers),
      body: typeof init?.body === "string" ? init.body : undefined,
      status: res.status,
      responseHeaders: res.headers,
      startedAt,
      endedAt: Date.now(),
    });
    return res;
  };
  return { fetch: recorder, sent };
}

/** What `promise` rejected with (fails when it resolved). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

/** Runs `fn` with these settings variables set (and the others unset), then restores them. */
export async function withEnv<T>(vars: Record<string, string>, fn: () => T | Promise<T>): Promise<T> {
  const saved = Object.fromEntries([...SETTINGS, "HOME", ...Object.keys(vars)].map((name) => [name, process.env[name]]));
  for (const name of SETTINGS) delete process.env[name];
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** Committed results written straight into the database and the batch ended, as the worker does. */
export async function finishDirectly(batchId: string, records: number, finishedAgoMs = 0): Promise<void> {
  await withDb(async (db) => {
    for (let line = 1; line <= records; line++) {
      const result = `{"custom_id":"r${line}","response":{"model":"m","answers":{"q":{"type":"noul","noul":0.5}},"usage":{"input_tokens":1,"output_tokens":1}}}`;
      await db.query("INSERT INTO batch_results (batch_id, line, custom_id, result) VALUES ($1, $2, $3, $4)", [batchId, line, `r${line}`, result]);
    }
    await db.query(
      `UPDATE batches SET status = 'completed', finished_at = now() - make_interval(secs => $2::double precision / 1000),
              total_records = $3, completed_records = $3 WHERE id = $1`,
      [batchId, finishedAgoMs, records],
    );
  });
}
