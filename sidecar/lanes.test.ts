/**
 * The lane queue as a specification: one execution at a time, one waiter per lane, 529 at once on a
 * full lane, 504 after the wait without opening a second slot, four real-time starts before a waiting
 * bulk one, failures passed through once. The work is a deferred promise the test settles, so every
 * ordering is decided by the test and not by a clock; waits use vitest's fake timers.
 */
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LIMITS } from "../contract/limits.ts";
import { LaneFullError, Lanes, LaneWaitTimeoutError, type LaneName, type LanesOptions } from "./lanes.ts";

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** One submission; the test decides when and how its work settles. */
class Job {
  /** Times `work` was called: 0 or 1, never more (no retries). */
  calls = 0;
  outcome: Outcome | undefined;
  /** Settles with the caller's outcome and never rejects, so no rejection goes unhandled. */
  settled!: Promise<Outcome>;
  readonly done: Promise<unknown>;
  private settle!: { resolve: (value: unknown) => void; reject: (error: unknown) => void };

  constructor(
    readonly id: string,
    readonly lane: LaneName,
  ) {
    this.done = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
  }

  finish(value: unknown = `${this.id} done`): void {
    this.settle.resolve(value);
  }

  fail(error: unknown): void {
    this.settle.reject(error);
  }
}

/** Submits jobs to the lanes and counts how many executions overlap. */
class ControlledWork {
  readonly starts: string[] = [];
  active = 0;
  maxActive = 0;
  /** The job started last; with one execution at a time, the one running if any runs. */
  current: Job | undefined;
  private readonly counts: Record<LaneName, number> = { realtime: 0, bulk: 0 };

  constructor(readonly lanes: Lanes) {}

  submit(lane: LaneName, options: { throwSync?: unknown; signal?: AbortSignal } = {}): Job {
    const job = new Job(`${lane === "realtime" ? "R" : "B"}${this.counts[lane]++}`, lane);
    const work = (): Promise<unknown> => {
      job.calls++;
      this.active++;
      this.maxActive = Math.max(this.maxActive, this.active);
      this.starts.push(job.id);
      this.current = job;
      if (options.throwSync !== undefined) {
        this.active--;
        throw options.throwSync;
      }
      return job.done.finally(() => this.active--);
    };
    const record = (outcome: Outcome): Outcome => (job.outcome = outcome);
    job.settled = this.lanes.run(lane, work, options.signal).then(
      (value) => record({ ok: true, value }),
      (error: unknown) => record({ ok: false, error }),
    );
    return job;
  }
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

function errorOf(job: Job): unknown {
  expect(job.outcome?.ok).toBe(false);
  return job.outcome?.ok === false ? job.outcome.error : undefined;
}

describe("Lanes: one execution at a time", () => {
  it("starts at once when nothing runs or waits, and hands back the result unchanged", async () => {
    const work = new ControlledWork(new Lanes());
    const value = { scores: [0.25, 0.75] };
    const job = work.submit("realtime");
    expect(work.starts).toEqual(["R0"]);
    expect(work.lanes.snapshot()).toEqual({ running: "realtime", waiting: { realtime: 0, bulk: 0 } });
    job.finish(value);
    const outcome = await job.settled;
    expect(outcome.ok && outcome.value).toBe(value);
    expect(work.lanes.snapshot()).toEqual({ running: null, waiting: { realtime: 0, bulk: 0 } });
  });

  it("starts bulk work at once too when the GPU is free", () => {
    const work = new ControlledWork(new Lanes());
    work.submit("bulk");
    expect(work.lanes.snapshot()).toEqual({ running: "bulk", waiting: { realtime: 0, bulk: 0 } });
  });

  it("never runs two executions together; each waiter starts only when the running one settles", async () => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    const r1 = work.submit("realtime");
    const b0 = work.submit("bulk");
    expect(work.starts).toEqual(["R0"]);
    expect(work.lanes.snapshot()).toEqual({ running: "realtime", waiting: { realtime: 1, bulk: 1 } });
    r0.finish();
    await r0.settled;
    expect(work.starts).toEqual(["R0", "R1"]);
    r1.finish();
    await r1.settled;
    expect(work.starts).toEqual(["R0", "R1", "B0"]);
    b0.finish();
    await b0.settled;
    expect(work.maxActive).toBe(1);
    expect(work.lanes.snapshot()).toEqual({ running: null, waiting: { realtime: 0, bulk: 0 } });
  });
});

describe("Lanes: a full lane answers 529 at once", () => {
  it.each<[LaneName, LaneName]>([
    ["realtime", "realtime"],
    ["bulk", "bulk"],
    ["realtime", "bulk"],
    ["bulk", "realtime"],
  ])("refuses a second waiting %s execution while a %s one runs", async (lane, runningLane) => {
    const work = new ControlledWork(new Lanes());
    work.submit(runningLane);
    const waiting = work.submit(lane);
    const refused = work.submit(lane);
    await flush();
    const error = errorOf(refused);
    expect(error).toBeInstanceOf(LaneFullError);
    expect(error).toMatchObject({ status: 529, code: "lane_full", lane });
    expect((error as LaneFullError).message).toMatch(lane === "realtime" ? /^real-time lane is full/ : /^bulk lane is full/);
    expect((error as LaneFullError).toBody()).toEqual({ error: { code: "lane_full", status: 529, message: (error as Error).message } });
    expect(refused.calls).toBe(0);
    expect(waiting.outcome).toBeUndefined();
    expect(work.lanes.snapshot().waiting[lane]).toBe(1);
  });

  it("refuses without waiting for any timer", async () => {
    vi.useFakeTimers();
    try {
      const work = new ControlledWork(new Lanes());
      work.submit("realtime");
      work.submit("realtime");
      const refused = work.submit("realtime");
      await flush();
      expect(errorOf(refused)).toBeInstanceOf(LaneFullError);
      expect(vi.getTimerCount()).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("keeps the lanes apart: a full real-time lane still takes a bulk waiter", async () => {
    const work = new ControlledWork(new Lanes());
    work.submit("realtime");
    work.submit("realtime");
    const bulk = work.submit("bulk");
    await flush();
    expect(bulk.outcome).toBeUndefined();
    expect(work.lanes.snapshot()).toEqual({ running: "realtime", waiting: { realtime: 1, bulk: 1 } });
  });

  it("honours another pendingPerLane: 0 refuses any waiter, 2 takes two", async () => {
    const none = new ControlledWork(new Lanes({ pendingPerLane: 0 }));
    none.submit("bulk");
    const refused = none.submit("realtime");
    await flush();
    expect(errorOf(refused)).toBeInstanceOf(LaneFullError);

    const two = new ControlledWork(new Lanes({ pendingPerLane: 2 }));
    two.submit("bulk");
    const accepted = [two.submit("bulk"), two.submit("bulk")];
    const third = two.submit("bulk");
    await flush();
    expect(accepted.map((job) => job.outcome)).toEqual([undefined, undefined]);
    expect(errorOf(third)).toBeInstanceOf(LaneFullError);
  });
});

describe("Lanes: four real-time starts before a waiting bulk one", () => {
  /** Finishes the running job `rounds` times, refilling both lanes so each always has a waiter. */
  async function refilledOrder(lanes: Lanes, rounds: number): Promise<string> {
    const work = new ControlledWork(lanes);
    work.submit("realtime");
    work.submit("bulk");
    work.submit("realtime");
    const order: LaneName[] = [];
    for (let i = 0; i < rounds; i++) {
      const running = work.current!;
      running.finish();
      await running.settled;
      order.push(work.current!.lane);
      const { waiting } = lanes.snapshot();
      if (waiting.realtime === 0) work.submit("realtime");
      if (waiting.bulk === 0) work.submit("bulk");
    }
    expect(work.maxActive).toBe(1);
    return order.map((lane) => (lane === "realtime" ? "R" : "B")).join(" ");
  }

  it("with both lanes continuously refilled, starts R R R R B R R R R B ...", async () => {
    expect(await refilledOrder(new Lanes(), 15)).toBe("R R R R B R R R R B R R R R B");
  });

  it("follows realtimeBeforeBulk: 2 gives bulk every third turn, 0 puts bulk first whenever both wait", async () => {
    expect(await refilledOrder(new Lanes({ realtimeBeforeBulk: 0 }), 6)).toBe("B B B B B B");
    expect(await refilledOrder(new Lanes({ realtimeBeforeBulk: 2 }), 6)).toBe("R R B R R B");
  });

  it("starts a bulk waiter right away when it is the only waiter", async () => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    work.submit("bulk");
    r0.finish();
    await r0.settled;
    expect(work.starts).toEqual(["R0", "B0"]);
  });

  it("counts only the real-time starts after the bulk entry began waiting", async () => {
    const work = new ControlledWork(new Lanes());
    // Three real-time executions run before any bulk waits: a counter kept since the last bulk start,
    // rather than since this entry enqueued, would let the bulk entry go after only one more.
    for (let i = 0; i < 3; i++) {
      const running = work.submit("realtime");
      running.finish();
      await running.settled;
    }
    const r3 = work.submit("realtime");
    work.submit("bulk");
    work.submit("realtime");
    r3.finish();
    await r3.settled;
    for (let i = 0; i < 4; i++) {
      const running = work.current!;
      work.submit("realtime");
      running.finish();
      await running.settled;
    }
    expect(work.starts.slice(3)).toEqual(["R3", "R4", "R5", "R6", "R7", "B0"]);
  });
});

describe("Lanes: a wait of 30 s answers 504 and opens no second slot", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each<LaneName>(["realtime", "bulk"])("times out a %s waiter after laneWaitMs, frees its slot, starts nothing early", async (lane) => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    const waiter = work.submit(lane);
    await vi.advanceTimersByTimeAsync(LIMITS.laneWaitMs - 1);
    expect(waiter.outcome).toBeUndefined();

    await vi.advanceTimersByTimeAsync(1);
    const error = errorOf(waiter);
    expect(error).toBeInstanceOf(LaneWaitTimeoutError);
    expect(error).toMatchObject({ status: 504, code: "timeout", lane, waitedMs: LIMITS.laneWaitMs });
    expect((error as Error).message).toBe(
      `${lane === "realtime" ? "real-time" : "bulk"} execution waited ${LIMITS.laneWaitMs} ms and the GPU stayed occupied`,
    );
    // The running execution is still the only one; the timed-out work was never called.
    expect(work.starts).toEqual(["R0"]);
    expect(waiter.calls).toBe(0);
    expect(work.lanes.snapshot()).toEqual({ running: "realtime", waiting: { realtime: 0, bulk: 0 } });

    // Its slot is free: a new submission to that lane waits instead of answering 529.
    const next = work.submit(lane);
    await flush();
    expect(next.outcome).toBeUndefined();
    expect(work.lanes.snapshot().waiting[lane]).toBe(1);

    // The next one starts only when the running one settles.
    await vi.advanceTimersByTimeAsync(LIMITS.laneWaitMs / 2);
    expect(work.starts).toEqual(["R0"]);
    r0.finish();
    await r0.settled;
    expect(work.starts).toEqual(["R0", next.id]);
    expect(work.maxActive).toBe(1);
  });

  it("does not time out an execution that started before its deadline, however long it runs", async () => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    const r1 = work.submit("realtime");
    await vi.advanceTimersByTimeAsync(LIMITS.laneWaitMs - 1);
    r0.finish();
    await r0.settled;
    expect(work.starts).toEqual(["R0", "R1"]);
    await vi.advanceTimersByTimeAsync(10 * LIMITS.laneWaitMs);
    expect(r1.outcome).toBeUndefined();
    r1.finish("late but fine");
    expect(await r1.settled).toEqual({ ok: true, value: "late but fine" });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("honours another waitMs", async () => {
    const work = new ControlledWork(new Lanes({ waitMs: 50 }));
    work.submit("bulk");
    const waiter = work.submit("bulk");
    await vi.advanceTimersByTimeAsync(50);
    expect(errorOf(waiter)).toMatchObject({ code: "timeout", waitedMs: 50 });
  });
});

describe("Lanes: a caller that gives up", () => {
  it("leaves the queue at once when its signal aborts, freeing the pending slot for a retry", async () => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    const abandon = new AbortController();
    const r1 = work.submit("realtime", { signal: abandon.signal });
    expect(work.lanes.snapshot().waiting.realtime).toBe(1);
    abandon.abort(new Error("client disconnected"));
    await r1.settled;
    expect((errorOf(r1) as Error).message).toBe("client disconnected");
    expect(work.lanes.snapshot().waiting.realtime).toBe(0);

    const retry = work.submit("realtime");
    r0.finish();
    await flush();
    expect(work.starts).toEqual(["R0", "R2"]);
    expect(r1.calls).toBe(0);
    retry.finish();
    expect((await retry.settled).ok).toBe(true);
  });

  it("never starts work whose signal has already aborted, even with the GPU free", async () => {
    const work = new ControlledWork(new Lanes());
    const job = work.submit("bulk", { signal: AbortSignal.abort(new Error("gone")) });
    await job.settled;
    expect(job.calls).toBe(0);
    expect(work.lanes.snapshot()).toEqual({ running: null, waiting: { realtime: 0, bulk: 0 } });
  });

  it("ignores an abort once the work has started: the execution keeps its slot", async () => {
    const work = new ControlledWork(new Lanes());
    const r0 = work.submit("realtime");
    const late = new AbortController();
    const r1 = work.submit("realtime", { signal: late.signal });
    r0.finish();
    await flush();
    late.abort();
    await flush();
    expect(work.lanes.snapshot().running).toBe("realtime");
    r1.finish();
    expect((await r1.settled).ok).toBe(true);
  });
});

describe("Lanes: failures", () => {
  it("hands a rejected work's error to its caller once, unchanged and unretried, and starts the next", async () => {
    const work = new ControlledWork(new Lanes());
    const failure = new Error("runtime answered 500");
    const r0 = work.submit("realtime");
    const b0 = work.submit("bulk");
    r0.fail(failure);
    expect(await r0.settled).toEqual({ ok: false, error: failure });
    expect(errorOf(r0)).toBe(failure);
    expect(r0.calls).toBe(1);
    expect(work.starts).toEqual(["R0", "B0"]);
    b0.finish();
    expect((await b0.settled).ok).toBe(true);
    expect(work.lanes.snapshot()).toEqual({ running: null, waiting: { realtime: 0, bulk: 0 } });
  });

  it("treats a work that throws before returning a promise the same way", async () => {
    const work = new ControlledWork(new Lanes());
    const failure = new TypeError("bad request shape");
    const r0 = work.submit("realtime", { throwSync: failure });
    await r0.settled;
    expect(errorOf(r0)).toBe(failure);
    expect(work.lanes.snapshot().running).toBeNull();

    const r1 = work.submit("realtime");
    const r2 = work.submit("realtime", { throwSync: failure });
    const r3 = work.submit("bulk");
    r1.finish();
    await r2.settled;
    expect(errorOf(r2)).toBe(failure);
    expect(work.starts).toEqual(["R0", "R1", "R2", "B0"]);
    expect(r3.calls).toBe(1);
  });

  it("rejects options that cannot work", () => {
    expect(() => new Lanes({ waitMs: 0 })).toThrow(RangeError);
    expect(() => new Lanes({ pendingPerLane: -1 })).toThrow(RangeError);
    expect(() => new Lanes({ realtimeBeforeBulk: 1.5 })).toThrow(RangeError);
  });
});

type Action = { kind: "submit"; lane: LaneName } | { kind: "finish"; fail: boolean } | { kind: "advance"; ms: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant("submit" as const), lane: fc.constantFrom<LaneName>("realtime", "bulk") }),
  fc.record({ kind: fc.constant("finish" as const), fail: fc.boolean() }),
  fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 40 }) }),
);

const optionsArb: fc.Arbitrary<Required<Omit<LanesOptions, "observer">>> = fc.record({
  waitMs: fc.integer({ min: 1, max: 50 }),
  realtimeBeforeBulk: fc.integer({ min: 0, max: 5 }),
  pendingPerLane: fc.integer({ min: 0, max: 3 }),
});

/**
 * Drives one random history against the rules, tracking on the test side which jobs wait and how
 * many real-time starts each waiting bulk job has seen.
 */
async function checkHistory(options: Required<Omit<LanesOptions, "observer">>, actions: Action[]): Promise<void> {
  const lanes = new Lanes(options);
  const work = new ControlledWork(lanes);
  const accepted: Job[] = [];
  const waiting = (): Job[] => accepted.filter((job) => job.calls === 0 && job.outcome === undefined);
  const realtimeSeen = new Map<Job, number>();

  /** Checks the starts one action caused: at most one, and the one the rules pick. */
  const settleStarts = (before: number, expected: Job | undefined): void => {
    const started = work.starts.slice(before);
    expect(started).toEqual(expected === undefined ? [] : [expected.id]);
    if (expected === undefined) return;
    if (expected.lane === "bulk") expect(realtimeSeen.get(expected) ?? 0).toBeLessThanOrEqual(options.realtimeBeforeBulk);
    if (expected.lane === "realtime") {
      for (const job of waiting()) if (job.lane === "bulk") realtimeSeen.set(job, (realtimeSeen.get(job) ?? 0) + 1);
    }
  };

  const checkInvariants = (): void => {
    const snapshot = lanes.snapshot();
    const queued = waiting();
    expect(work.maxActive).toBeLessThanOrEqual(1);
    expect(snapshot.waiting.realtime).toBe(queued.filter((job) => job.lane === "realtime").length);
    expect(snapshot.waiting.bulk).toBe(queued.filter((job) => job.lane === "bulk").length);
    expect(snapshot.waiting.realtime).toBeLessThanOrEqual(options.pendingPerLane);
    expect(snapshot.waiting.bulk).toBeLessThanOrEqual(options.pendingPerLane);
    const running = work.active === 1 ? work.current : undefined;
    expect(snapshot.running).toBe(running?.lane ?? null);
    // Work-conserving: nobody waits while the GPU is free.
    if (queued.length > 0) expect(snapshot.running).not.toBeNull();
  };

  const finishRunning = async (fail: boolean): Promise<void> => {
    const running = work.active === 1 ? work.current : undefined;
    if (running === undefined) return;
    const queued = waiting();
    const headRealtime = queued.find((job) => job.lane === "realtime");
    const headBulk = queued.find((job) => job.lane === "bulk");
    const bulkTurn = headBulk !== undefined && (realtimeSeen.get(headBulk) ?? 0) >= options.realtimeBeforeBulk;
    const expected = headRealtime === undefined || bulkTurn ? headBulk : headRealtime;
    const before = work.starts.length;
    const failure = new Error(`${running.id} failed`);
    if (fail) running.fail(failure);
    else running.finish();
    const outcome = await running.settled;
    expect(outcome).toEqual(fail ? { ok: false, error: failure } : { ok: true, value: `${running.id} done` });
    settleStarts(before, expected);
  };

  for (const action of actions) {
    const before = work.starts.length;
    if (action.kind === "submit") {
      const snapshot = lanes.snapshot();
      const job = work.submit(action.lane);
      await flush();
      if (snapshot.running === null) {
        settleStarts(before, job);
        accepted.push(job);
      } else if (snapshot.waiting[action.lane] >= options.pendingPerLane) {
        // A 529 exactly when the lane was full, and never a call of the work.
        expect(errorOf(job)).toBeInstanceOf(LaneFullError);
        expect(job.calls).toBe(0);
        settleStarts(before, undefined);
      } else {
        expect(job.outcome).toBeUndefined();
        settleStarts(before, undefined);
        accepted.push(job);
      }
    } else if (action.kind === "finish") {
      await finishRunning(action.fail);
    } else {
      const queuedBefore = waiting();
      await vi.advanceTimersByTimeAsync(action.ms);
      await flush();
      // Time passing never starts anything; it only times waiters out.
      settleStarts(before, undefined);
      for (const job of queuedBefore) {
        if (job.outcome !== undefined) expect(errorOf(job)).toMatchObject({ code: "timeout", waitedMs: options.waitMs });
      }
    }
    checkInvariants();
  }

  // Every accepted job either starts or times out: finish whatever runs until the GPU is idle.
  for (let i = 0; work.active === 1 && i <= accepted.length; i++) await finishRunning(false);
  checkInvariants();
  expect(lanes.snapshot()).toEqual({ running: null, waiting: { realtime: 0, bulk: 0 } });
  for (const job of accepted) {
    expect(job.outcome).toBeDefined();
    if (job.calls === 0) expect(errorOf(job)).toBeInstanceOf(LaneWaitTimeoutError);
    else expect(job.calls).toBe(1);
  }
  expect(vi.getTimerCount()).toBe(0);
}

describe("Lanes: random histories (fast-check)", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("keep every rule for any sequence of submissions, completions and waits", async () => {
    await fc.assert(
      fc.asyncProperty(optionsArb, fc.array(actionArb, { maxLength: 80 }), async (options, actions) => {
        vi.clearAllTimers();
        await checkHistory(options, actions);
      }),
      { numRuns: 300 },
    );
  });

  it("keep every rule under the spec's limits with long busy histories", async () => {
    const limits = { waitMs: 30, realtimeBeforeBulk: LIMITS.realtimeBeforeBulk, pendingPerLane: LIMITS.pendingPerLane };
    await fc.assert(
      fc.asyncProperty(fc.array(actionArb, { minLength: 50, maxLength: 200 }), async (actions) => {
        vi.clearAllTimers();
        await checkHistory(limits, actions);
      }),
      { numRuns: 100 },
    );
  });
});

describe("Lanes: what the observer (the sidecar's metrics) is told", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("each start with how long it waited, each 529 and each 504, and nothing for a waiter that gave up", async () => {
    const told: string[] = [];
    const lanes = new Lanes({ observer: { started: (lane, waitedMs) => told.push(`start ${lane} ${waitedMs}`), refused: (lane, code) => told.push(`refuse ${lane} ${code}`) } });
    const work = new ControlledWork(lanes);
    const r0 = work.submit("realtime");
    const b0 = work.submit("bulk");
    work.submit("bulk"); // the bulk lane holds its one waiter: 529 at once
    const abort = new AbortController();
    work.submit("realtime", { signal: abort.signal });
    abort.abort();
    await vi.advanceTimersByTimeAsync(250);
    r0.finish();
    await flush();
    expect(told).toEqual(["start realtime 0", "refuse bulk lane_full", "start bulk 250"]);

    const r1 = work.submit("realtime");
    await vi.advanceTimersByTimeAsync(LIMITS.laneWaitMs);
    expect(told.slice(3)).toEqual(["refuse realtime timeout"]);
    b0.finish();
    await flush();
    expect(r1.calls).toBe(0);
  });
});
