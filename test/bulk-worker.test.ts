/**
 * The bulk worker on the shared stack: a batch goes from submit to results through the real edge,
 * R2, Postgres, the sidecar's worker and the runtime with the default model. Crash, restart and
 * retention tests need their own stacks with shortened periods: test/bulk-crash.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Batch, type ResultRecord } from "../contract/batches.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { setStatus } from "../ops/accounts.ts";
import { RUNTIME_PATHS, Stats } from "../server-shared/runtime-protocol.ts";
import { call, newAccount, query, stack, withDb } from "./support/api.ts";
import { heldSubmitted, lines, poll, results, submitted, type Account } from "./support/bulk.ts";

const noul = (i: number) => ({ custom_id: `t-${i}`, body: { state: `ticket ${i}: I was charged twice`, questions: { money: { type: "noul", instructions: "Is it about money?" } } } });

let account: Account;
beforeAll(async () => {
  account = await newAccount();
});

describe("a batch through the worker", () => {
  it("answers every record in input order, with error records where the real-time route would refuse, and one usage row per answer", async () => {
    const invalid = { custom_id: "bad-body", body: { state: "s" } };
    const unknown = { custom_id: "no-model", body: { ...noul(9).body, model: "not-a-model" } };
    const file = lines([noul(1), noul(2), invalid, noul(3), unknown, noul(4)]);
    const id = await submitted(account, file);
    const done = await poll(account, id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 6, completed: 4, failed: 2 }, error: null, progress: null });
    expect(done.started_at).not.toBeNull();

    const records = await results(account, id);
    expect(records.map((r) => r.custom_id)).toEqual(["t-1", "t-2", "bad-body", "t-3", "no-model", "t-4"]);
    // The same refusals as real time, for the same bodies.
    const realtimeInvalid = await call("/v1/systemone", { token: account.key.secret, body: invalid.body });
    expect(records[2]).toEqual({ custom_id: "bad-body", error: ErrorEnvelope.parse(realtimeInvalid.body).error });
    expect(records[4]).toMatchObject({ custom_id: "no-model", error: { status: 404, code: "model_not_found" } });
    const answered = records.filter((r): r is Extract<ResultRecord, { response: unknown }> => "response" in r);
    expect(answered).toHaveLength(4);
    for (const r of answered) expect(r.response.answers.get("money")).toMatchObject({ type: "noul" });

    const usage = await query<{ request_id: string; input_tokens: number; source: string }>(
      "SELECT request_id, input_tokens, source FROM usage_records WHERE request_id LIKE $1 ORDER BY request_id",
      [`batch_${id}_%`],
    );
    expect(usage.map((u) => u.request_id).sort()).toEqual([1, 2, 4, 6].map((line) => `batch_${id}_${line}`).sort());
    for (const u of usage) {
      expect(u.source).toBe("bulk");
      expect(u.input_tokens).toBeGreaterThan(0);
    }
  });

  it("takes turns between batches: while two have work, the worker alternates, one record per claim", async () => {
    const other = await newAccount();
    const file = (tag: string) => lines(Array.from({ length: 6 }, (_, i) => ({ ...noul(i), custom_id: `${tag}-${i}` })));
    const ids = [await submitted(account, file("a")), await submitted(other, file("b"))];
    await Promise.all([poll(account, ids[0]!), poll(other, ids[1]!)]);
    const rows = await query<{ batch_id: string }>("SELECT batch_id FROM batch_results WHERE batch_id = ANY ($1) ORDER BY committed_at, line", [ids]);
    const order = rows.map((r) => (r.batch_id === ids[0] ? "a" : "b")).join("");
    expect(order).toHaveLength(12);
    // From the first commit of the later batch to the last commit of the one that finished first,
    // no batch commits twice in a row (the first may run alone before the second is validated).
    const from = Math.max(order.indexOf("a"), order.indexOf("b")) - 1;
    const to = Math.min(order.lastIndexOf("a"), order.lastIndexOf("b")) + 1;
    const shared = order.slice(from, to + 1);
    expect(shared.length, order).toBeGreaterThanOrEqual(6);
    expect(shared, order).not.toMatch(/aa|bb/);
  });

  it("evaluates every record once while it prepares the next one during each: alone, and while two batches take turns (nothing prepared is dropped)", async () => {
    const passes = async () => {
      const res = await fetch(`${stack().runtimeUrl}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${stack().secrets.runtime}` } });
      return Stats.parse(await res.json()).passes;
    };
    // The question's content-free reading is kept from the tests above: one pass a record.
    await poll(account, await submitted(account, lines([noul(100)])));
    const before = await passes();
    const eight = await submitted(account, lines(Array.from({ length: 8 }, (_, i) => noul(200 + i))));
    await poll(account, eight);
    expect((await passes()) - before).toBe(8);
    // A CPU pass fills a bulk execution (steps.ts ClaimSize): each record was claimed and committed on
    // its own (a commit's rows share its transaction's time).
    const commits = await query<{ commits: number }>("SELECT count(DISTINCT committed_at)::int AS commits FROM batch_results WHERE batch_id = $1", [eight]);
    expect(commits[0]!.commits).toBe(8);

    // Two batches released together: while the other waits for its turn, nothing is prepared ahead.
    const other = await newAccount();
    const file = (tag: string) => lines(Array.from({ length: 6 }, (_, i) => ({ ...noul(300 + i), custom_id: `${tag}-${i}` })));
    const held = [await heldSubmitted(account, file("a")), await heldSubmitted(other, file("b"))];
    const mid = await passes();
    await Promise.all(held.map((h) => h.release()));
    await Promise.all([poll(account, held[0]!.id), poll(other, held[1]!.id)]);
    expect((await passes()) - mid).toBe(12);
    const answers = await query<{ n: number }>("SELECT count(*)::int AS n FROM batch_results WHERE batch_id = ANY ($1)", [held.map((h) => h.id)]);
    expect(answers[0]!.n).toBe(12);
  });

  it("fails a bad file as a whole, naming the first offending line, with no inference", async () => {
    const cases: Array<[string, string, number | null]> = [
      ["\n\n", "empty_file", null],
      [lines([noul(1), "{not json"]), "invalid_jsonl", 2],
      [lines([noul(1), noul(2), noul(1)]), "duplicate_custom_id", 3],
      [lines([noul(1), '{"custom_id":"x","body":{"state":"a\\u0000b","questions":{"q":{"type":"noul"}}}}']), "nul_character", 2],
      [lines([{ custom_id: "", body: {} }]), "invalid_record", 1],
      [lines([{ custom_id: "a", body: {}, extra: 1 }]), "invalid_record", 1],
    ];
    const ids = await Promise.all(cases.map(([file]) => submitted(account, file)));
    for (const [i, id] of ids.entries()) {
      const done = await poll(account, id);
      expect(done.status, JSON.stringify(done)).toBe("failed");
      expect(done.error).toMatchObject({ code: cases[i]![1], line: cases[i]![2] });
      expect(done.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
      expect(await results(account, id)).toEqual([]);
      expect(await query("SELECT 1 FROM usage_records WHERE request_id LIKE $1", [`batch_${id}_%`])).toHaveLength(0);
    }
  });

  it("takes no batch of a disabled account, and runs it once the account is enabled again", async () => {
    const other = await newAccount();
    // Held until the account is disabled: otherwise the worker may take it first.
    const { id, release } = await heldSubmitted(other, lines([noul(1), noul(2)]));
    await withDb((db) => setStatus(db, other.accountId, "disabled"));
    await release();
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const [waiting] = await query<{ status: string; started_at: string | null }>("SELECT status, started_at FROM batches WHERE id = $1", [id]);
    expect(waiting).toEqual({ status: "queued", started_at: null });
    await withDb((db) => setStatus(db, other.accountId, "active"));
    expect((await poll(other, id)).status).toBe("completed");
  });

  it("expires a batch whose deadline has passed, keeping what was committed", async () => {
    const id = await submitted(account, lines([noul(1)]));
    await query("UPDATE batches SET expires_at = now() - interval '1 second' WHERE id = $1 AND status = 'queued'", [id]);
    const done = await poll(account, id);
    expect(["expired", "completed"]).toContain(done.status);
    if (done.status === "expired") expect(await results(account, id)).toEqual([]);
  });

  it("stops a cancelled batch at once, keeping its committed results and counting them exactly", async () => {
    const id = await submitted(account, lines(Array.from({ length: 30 }, (_, i) => noul(i))));
    const running = await poll(account, id, (b) => b.request_counts.completed >= 2);
    expect(running.status).toBe("running");
    expect(running.progress?.records_per_minute).toBeGreaterThan(0);
    const cancelled = await call<Batch>(`/v1/batches/${id}/cancel`, { token: account.key.secret, body: {} });
    expect(cancelled.body.status).toBe("cancelled");
    // A record in flight may not commit after the cancel; give it time to try.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const after = Batch.parse((await call(`/v1/batches/${id}`, { token: account.key.secret })).body);
    expect(after.request_counts).toEqual(cancelled.body.request_counts);
    const committed = await results(account, id);
    expect(committed).toHaveLength(after.request_counts.completed + after.request_counts.failed);
    expect(committed.length).toBeLessThan(30);
  });
});
