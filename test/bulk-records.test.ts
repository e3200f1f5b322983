/**
 * A bulk claim's records as one execution (sidecar/bulk/records.ts processRecords), on the shared
 * stack's runtime with the default model, through a lane queue of the test's own: the records run in
 * order in one bulk execution, and a real-time execution that comes in meanwhile goes before the
 * records not started yet, which then run in a second bulk execution. Nothing is run twice or lost.
 * Two consecutive executions of one worker (as sidecar/bulk/steps.ts runs a claim and the next one
 * prepared ahead): the second enters the lane once the first has started its last record, before
 * the first's results are in, and their passes share the runtime's slots.
 */
import { describe, expect, it } from "vitest";
import { RUNTIME_PATHS, Stats } from "../server-shared/runtime-protocol.ts";
import { REGISTRY_COLUMNS, RegistryEntry } from "../server-shared/registry.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { RUNTIME_TOKEN_ENV } from "../local/stack.ts";
import { BULK_PASSES_IN_FLIGHT, BulkFlow, processRecords, type RecordContext } from "../sidecar/bulk/records.ts";
import { Lanes, type LaneName } from "../sidecar/lanes.ts";
import { query, stack } from "./support/api.ts";

async function servedEntry(): Promise<RegistryEntry> {
  const rows = await query(`SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE id = $1`, [stack().releaseId]);
  return RegistryEntry.parse(rows[0]);
}

async function passes(): Promise<number> {
  const res = await fetch(`${stack().runtimeUrl}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${stack().secrets.runtime}` } });
  return Stats.parse(await res.json()).passes;
}

/** Records of one noul question on states never seen before. */
const recordsOf = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({
    line: from + i + 1,
    customId: `r-${from + i}`,
    body: JSON.stringify({ state: `ticket ${from + i} ${crypto.randomUUID()}: charged twice`, questions: { q: { type: "noul", instructions: "Is it about money?" } } }),
  }));

const contextOf = (entry: RegistryEntry, lanes: RecordContext["lanes"], flow?: BulkFlow): RecordContext => ({
  lanes,
  redis: null,
  secrets: new SecretSource({ [RUNTIME_TOKEN_ENV]: stack().secrets.runtime }),
  account: { id: crypto.randomUUID(), requests_per_second: null, tokens_per_second: null },
  models: { releases: { [entry.id]: entry.fingerprint }, aliases: { "svc-shared": entry.id } },
  deadline: Date.now() + 120_000,
  ...(flow ? { flow } : {}),
});

describe("a bulk claim's records", () => {
  it("run in order as one execution, and hand the lane to real time between records: the rest run in a second execution", async () => {
    const entry = await servedEntry();
    const started: LaneName[] = [];
    let realtime: Promise<void> | null = null;
    const lanes: Lanes = new Lanes({
      observer: {
        started: (lane) => {
          started.push(lane);
          // Real time comes in once the first bulk execution runs (up to three records at the runtime at once).
          if (lane === "bulk" && realtime === null) {
            realtime = new Promise((resolve) => setTimeout(resolve, 0)).then(() => lanes.run("realtime", async () => undefined));
          }
        },
        refused: () => undefined,
      },
    });
    const ctx = contextOf(entry, lanes);
    const records = recordsOf(4);
    const before = await passes();
    const outcomes = await processRecords(ctx, records, entry, new AbortController().signal).outcomes;
    await realtime;

    expect(started).toEqual(["bulk", "realtime", "bulk"]);
    expect(outcomes.map((o) => o.kind)).toEqual(["result", "result", "result", "result"]);
    expect(outcomes.map((o) => (o.kind === "result" ? JSON.parse(o.text).custom_id : null))).toEqual(["r-0", "r-1", "r-2", "r-3"]);
    // Each record's state evaluated once; the question's content-free reading, not kept yet, is read
    // by each record at the runtime at once before the first of them keeps it.
    const ran = (await passes()) - before;
    expect(ran).toBeGreaterThanOrEqual(4);
    expect(ran).toBeLessThanOrEqual(4 + BULK_PASSES_IN_FLIGHT);
  });

  it("of two consecutive executions: the second enters the lane once the first has started its last record, so its passes follow the first's last ones at the runtime, sharing their slots", async () => {
    const entry = await servedEntry();
    const lanes = new Lanes();
    const flow = new BulkFlow();
    // The flow's pass slots, counted: never more passes of both at the runtime than BULK_PASSES_IN_FLIGHT.
    let atRuntime = 0;
    let most = 0;
    const { acquire, release } = { acquire: flow.passes.acquire.bind(flow.passes), release: flow.passes.release.bind(flow.passes) };
    // When the second execution's first pass went to the runtime (its records are ranked 6-11), how many of the first's were there.
    let firstsAtRuntime: number | null = null;
    flow.passes.acquire = async (rank) => {
      await acquire(rank);
      if (rank !== undefined && rank >= 6) firstsAtRuntime ??= atRuntime;
      most = Math.max(most, ++atRuntime);
    };
    flow.passes.release = () => {
      atRuntime -= 1;
      release();
    };
    const first = processRecords(contextOf(entry, lanes, flow), recordsOf(6), entry, new AbortController().signal);
    // As steps.ts queues the execution prepared ahead.
    const gated: RecordContext["lanes"] = {
      run: async (lane, work, signal) => {
        await first.leftLane;
        return lanes.run(lane, work, signal);
      },
      realtimeWaiting: () => lanes.realtimeWaiting(),
    };
    const second = processRecords(contextOf(entry, gated, flow), recordsOf(6, 6), entry, new AbortController().signal);
    const outcomes = [...(await first.outcomes), ...(await second.outcomes)];

    // The second's passes followed the first's last ones at the runtime, before the first's results were all in.
    expect(firstsAtRuntime).toBeGreaterThan(0);
    expect(outcomes.map((o) => (o.kind === "result" ? JSON.parse(o.text).custom_id : o.kind))).toEqual(Array.from({ length: 12 }, (_, i) => `r-${i}`));
    expect(most).toBeLessThanOrEqual(BULK_PASSES_IN_FLIGHT);
    expect(most).toBeGreaterThan(1);
  });
});
