/**
 * Bulk helpers for tests on the shared stack: a batch created, uploaded and submitted through the
 * real edge; its status polled; its results read page by page.
 */
import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import { Batch, ResultsPage, type ResultRecord } from "../../contract/batches.ts";
import { call, query, remember, type newAccount } from "./api.ts";

export type Account = Awaited<ReturnType<typeof newAccount>>;

/** A JSONL file of these records (strings are written as they are). */
export const lines = (records: unknown[]) => records.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join("\n") + "\n";

/** Creates, uploads and submits a batch; returns its id. */
export async function submitted(account: Account, file: string): Promise<string> {
  return (await submit(account, file, false)).id;
}

/**
 * Creates, uploads and submits a batch while the test holds its lease, as a worker would, so that no
 * real worker takes it before `release()`: for tests that read a state the worker moves on.
 */
export function heldSubmitted(account: Account, file: string): Promise<{ id: string; release: () => Promise<void> }> {
  return submit(account, file, true);
}

async function submit(account: Account, file: string, hold: boolean): Promise<{ id: string; release: () => Promise<void> }> {
  const created = await call<Batch>("/v1/batches", { token: account.key.secret, body: { idempotency_key: `w-${randomBytes(6).toString("hex")}`, input_bytes: Buffer.byteLength(file) } });
  const batch = Batch.parse(created.body);
  remember(new URL(batch.upload!.url).searchParams.get("X-Amz-Signature")!);
  const token = crypto.randomUUID();
  if (hold) await query("UPDATE batches SET lease_token = $2, lease_expires_at = now() + interval '10 minutes' WHERE id = $1", [batch.id, token]);
  const put = await fetch(batch.upload!.url, { method: "PUT", headers: batch.upload!.headers, body: file });
  expect(put.status).toBe(200);
  const reply = await call<Batch>(`/v1/batches/${batch.id}/submit`, { token: account.key.secret, body: {} });
  expect(reply.body.status).toBe("queued");
  const release = async () => {
    await query("UPDATE batches SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_token = $2", [batch.id, token]);
  };
  return { id: batch.id, release };
}

/** Polls until the batch is terminal (or `until` holds), returning the last status. */
export async function poll(account: Account, id: string, until: (b: Batch) => boolean = (b) => b.finished_at !== null, timeoutMs = 90_000): Promise<Batch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const batch = Batch.parse((await call(`/v1/batches/${id}`, { token: account.key.secret })).body);
    if (until(batch) || Date.now() > deadline) return batch;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export async function results(account: Account, id: string): Promise<ResultRecord[]> {
  const all: ResultRecord[] = [];
  let after: number | null = 0;
  while (after !== null) {
    const page: ResultsPage = ResultsPage.parse((await call(`/v1/batches/${id}/results?after=${after}`, { token: account.key.secret })).body);
    all.push(...page.data);
    after = page.next_cursor;
  }
  return all;
}

