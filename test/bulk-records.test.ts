/**
 * A bulk claim's records as one execution (sidecar/bulk/records.ts processRecords), on the shared
 * stack's runtime with the default model, through a lane queue of the test's own: the records run in
 * order in one bulk execution, and a real-time execution that comes in meanwhile goes before the
 * records not started yet, which then run in a second bulk execution. Nothing is run twice or lost.
 * Two consecutive executions of one worker (as sidecar/bulk/steps.ts runs a claim and the next one
 * prepared ahead): the second enters the lane once the first has started its last record, and their
 * passes share the background's groups. A real-time execution that comes in finds at most the
 * background's two group calls at the runtime (BACKGROUND_GROUPS), watched through a proxy that
 * forwards every call to the real runtime.
 */
import { describe, expect, it } from "vitest";
import { RUNTIME_PATHS, ScoreGroupRequest, Stats } from "../server-shared/runtime-protocol.ts";
import { REGISTRY_COLUMNS, RegistryEntry } from "../server-shared/registry.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { Decision } from "../server-shared/sidecar-protocol.ts";
import { RUNTIME_TOKEN_ENV } from "../local/stack.ts";
import { BACKGROUND_GROUPS, BACKGROUND_RECORDS, BackgroundSlots, processRecords, type RecordContext } from "../sidecar/bulk/records.ts";
import { executeDecision } from "../sidecar/decide/execute.ts";
import { Lanes, type LaneName } from "../sidecar/lanes.ts";
import { ownedBy, runtimeClientFor } from "../sidecar/runtime/client.ts";
import { query, stack } from "./support/api.ts";
import { listen } from "./support/fake-server.ts";

async function servedEntry(): Promise<RegistryEntry> {
  const rows = await query(`SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE id = $1`, [stack().releaseId]);
  return RegistryEntry.parse(rows[0]);
}

async function passes(): Promise<number> {
  const res = await fetch(`${stack().runtimeUrl}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${stack().secrets.runtime}` } });
  return Stats.parse(await res.json()).passes;
}

/** Records of one noul question on states never seen before (`words` more of them in each). */
const recordsOf = (n: number, from = 0, words = 0) =>
  Array.from({ length: n }, (_, i) => ({
    line: from + i + 1,
    customId: `r-${from + i}`,
    body: JSON.stringify({ state: `ticket ${from + i} ${crypto.randomUUID()}: charged twice ${"and again ".repeat(words)}`, questions: { q: { type: "noul", instructions: "Is it about money?" } } }),
  }));

/** A group's tokens by their byte bound as BACKGROUND_GROUPS counts them: each distinct prefix once, each pass's rest and its first token. */
function byteBound(passes: ScoreGroupRequest["passes"]): number {
  const prefixes = new Set<string>();
  let bound = 0;
  for (const pass of passes) {
    const cut = pass.prefix_segments ?? 0;
    const prefix = JSON.stringify([pass.prefix_owner, pass.segments.slice(0, cut).map((s) => s.text)]);
    if (!prefixes.has(prefix)) bound += pass.segments.slice(0, cut).reduce((n, s) => n + Buffer.byteLength(s.text), 0);
    prefixes.add(prefix);
    bound += 1 + pass.segments.slice(cut).reduce((n, s) => n + Buffer.byteLength(s.text), 0);
  }
  return bound;
}

/** A group call seen by the proxy: its passes' states, when it was sent and answered, and what else was at the runtime then. */
interface SeenCall {
  states: string[];
  bound: number;
  /** Whether it asked for the runtime's real-time turn (runtime-protocol.ts `realtime`). */
  realtime: boolean;
  sent: number;
  answered: number;
  /** The calls at the runtime when this one came in (itself not counted). */
  ahead: SeenCall[];
}

/** Forwards every runtime call to the stack's runtime, recording each group call. */
async function watchingProxy(): Promise<{ url: string; calls: SeenCall[]; stop(): Promise<void> }> {
  const calls: SeenCall[] = [];
  const open = new Set<SeenCall>();
  const server = await listen(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let call: SeenCall | null = null;
    if (req.url === RUNTIME_PATHS.scoreGroup) {
      const { passes, realtime } = ScoreGroupRequest.parse(JSON.parse(body.toString()));
      call = { states: passes.map((p) => p.segments[0]!.text), bound: byteBound(passes), realtime, sent: performance.now(), answered: Infinity, ahead: [...open] };
      calls.push(call);
      open.add(call);
    }
    const real = await fetch(`${stack().runtimeUrl}${req.url}`, { method: req.method, headers: { authorization: req.headers.authorization ?? "", "content-type": "application/json" }, ...(req.method === "POST" ? { body } : {}) });
    const text = await real.text();
    if (call) {
      call.answered = performance.now();
      open.delete(call);
    }
    res.statusCode = real.status;
    res.setHeader("content-type", "application/json");
    res.end(text);
  });
  return { url: server.url, calls, stop: () => server.stop() };
}

const contextOf = (entry: RegistryEntry, lanes: RecordContext["lanes"], background?: BackgroundSlots): RecordContext => ({
  lanes,
  redis: null,
  secrets: new SecretSource({ [RUNTIME_TOKEN_ENV]: stack().secrets.runtime }),
  account: { id: crypto.randomUUID(), requests_per_second: null, tokens_per_second: null },
  models: { releases: { [entry.id]: entry.fingerprint }, aliases: { "svc-shared": entry.id } },
  deadline: Date.now() + 120_000,
  ...(background ? { background } : {}),
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
          // Real time comes in once the first bulk execution runs: it has started BACKGROUND_RECORDS records, the rest wait for a place.
          if (lane === "bulk" && realtime === null) {
            realtime = new Promise((resolve) => setTimeout(resolve, 0)).then(() => lanes.run("realtime", async () => undefined));
          }
        },
        refused: () => undefined,
      },
    });
    const ctx = contextOf(entry, lanes);
    const n = BACKGROUND_RECORDS + 2;
    const records = recordsOf(n);
    const before = await passes();
    const outcomes = await processRecords(ctx, records, entry, new AbortController().signal).outcomes;
    await realtime;

    expect(started).toEqual(["bulk", "realtime", "bulk"]);
    expect(outcomes.map((o) => o.kind)).toEqual(Array(n).fill("result"));
    expect(outcomes.map((o) => (o.kind === "result" ? JSON.parse(o.text).custom_id : null))).toEqual(records.map((r) => r.customId));
    // Each record's state evaluated once; the question's content-free reading, not kept yet, read once for all of them.
    const ran = (await passes()) - before;
    expect(ran).toBeGreaterThanOrEqual(n);
    expect(ran).toBeLessThanOrEqual(n + 1);
  }, 120_000);

  it("of two consecutive executions: the second enters the lane once the first has started its last record, its passes in the background's groups, and real time finds at most two group calls ahead of it", async () => {
    const proxy = await watchingProxy();
    try {
      const entry = { ...(await servedEntry()), url: proxy.url };
      const lanes = new Lanes();
      const slots = new BackgroundSlots();
      // Longer states: each group is held to its tokens, so the records take several groups.
      const first = processRecords(contextOf(entry, lanes, slots), recordsOf(20, 0, 60), entry, new AbortController().signal);
      // As steps.ts queues the execution prepared ahead.
      const gated: RecordContext["lanes"] = {
        run: async (lane, work, signal) => {
          await first.leftLane;
          return lanes.run(lane, work, signal);
        },
        realtimeWaiting: () => lanes.realtimeWaiting(),
      };
      const second = processRecords(contextOf(entry, gated, slots), recordsOf(20, 20, 60), entry, new AbortController().signal);
      // A real-time decision once the background has calls at the runtime.
      while (proxy.calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const client = ownedBy(runtimeClientFor(entry, contextOf(entry, lanes).secrets), "real-time account");
      const release = { id: entry.id, fingerprint: entry.fingerprint };
      const answered = await lanes.run("realtime", () => executeDecision(client, release, Decision.parse({ state: "REAL TIME: I want my money back", questions: { q: { type: "noul", instructions: "Is it about money?" } } })));
      const outcomes = [...(await first.outcomes), ...(await second.outcomes)];

      expect(answered.answers.get("q")).toMatchObject({ type: "noul" });
      expect(outcomes.map((o) => (o.kind === "result" ? JSON.parse(o.text).custom_id : o.kind))).toEqual(Array.from({ length: 40 }, (_, i) => `r-${i}`));
      const background = proxy.calls.filter((c) => !c.states.some((s) => s.includes("REAL TIME")));
      const realtimeCall = proxy.calls.find((c) => c.states.some((s) => s.includes("REAL TIME")))!;
      // Every background group within its limits, and never more than two at the runtime at once.
      expect(background.length).toBeGreaterThan(2);
      for (const call of background) {
        expect(call.states.length).toBeLessThanOrEqual(BACKGROUND_GROUPS.passes);
        expect(call.ahead.length).toBeLessThan(BACKGROUND_GROUPS.calls);
        expect(call.bound + call.ahead.reduce((n, c) => n + c.bound, 0)).toBeLessThanOrEqual(BACKGROUND_GROUPS.tokens);
      }
      // Real time: one call, asking for the real-time turn (the runtime takes it before the background's
      // waiting turns: test/runtime.test.ts), behind at most the background's two.
      expect(realtimeCall.realtime).toBe(true);
      expect(background.every((c) => !c.realtime)).toBe(true);
      expect(realtimeCall.ahead.length).toBeLessThanOrEqual(BACKGROUND_GROUPS.calls);
      expect(realtimeCall.ahead.reduce((n, c) => n + c.bound, 0)).toBeLessThanOrEqual(BACKGROUND_GROUPS.tokens);
      // The second execution's first group went to the runtime before the first's last group answered.
      const ofSecond = (c: SeenCall) => c.states.some((s) => /ticket (2\d|3\d) /.test(s));
      const ofFirst = (c: SeenCall) => c.states.some((s) => /ticket (\d|1\d) /.test(s));
      expect(background.find(ofSecond)!.sent).toBeLessThan(Math.max(...background.filter(ofFirst).map((c) => c.answered)));
    } finally {
      await proxy.stop();
    }
  }, 180_000);
});
