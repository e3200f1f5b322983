/**
 * The lane queue in front of the one GPU runtime (runs in Bun next to the GPU). Every model execution
 * goes through `Lanes.run`; the rules are the spec's "Execution" section:
 *
 * - one runtime execution at a time holds the lane; the runtime itself works one turn at a time. A
 *   bulk execution leaves the lane once its last record has started, with at most the background's
 *   two group calls still at the runtime (bulk/records.ts BACKGROUND_GROUPS); a real-time execution
 *   that takes the lane then waits behind one turn of them at most, since the runtime takes a
 *   real-time call before the background's waiting turns (runtime-protocol.ts `realtime`);
 * - at most `pendingPerLane` (1) waiting executions per lane, real-time and bulk; a submission to a
 *   full lane is refused at once with 529 `lane_full`;
 * - a waiting execution not started within `waitMs` (30 s) is refused with 504 `timeout` and leaves
 *   its lane; the timeout never starts anything, so it cannot open a second slot next to the running
 *   execution;
 * - when both lanes wait, real-time goes first, except that a waiting bulk execution goes once
 *   `realtimeBeforeBulk` (4) real-time executions have started since it began waiting;
 * - a failed execution is handed to its caller unchanged and never retried here;
 * - a waiting execution whose caller gives up (its `signal` aborts, e.g. the client disconnected)
 *   leaves its lane at once, so an abandoned request does not hold the pending slot against a retry.
 *
 *     const lanes = new Lanes();
 *     const scores = await lanes.run("realtime", () => runtime.score(request, signal));
 */
import { ServiceError } from "../server-shared/errors.ts";
import { LIMITS } from "../contract/limits.ts";

export type LaneName = "realtime" | "bulk";

export interface LaneSnapshot {
  running: LaneName | null;
  waiting: Record<LaneName, number>;
}

export interface LanesOptions {
  /** How long a submission may wait for the GPU before it answers 504. */
  waitMs?: number;
  /** Real-time starts a waiting bulk execution lets go ahead of it. */
  realtimeBeforeBulk?: number;
  /** Waiting executions per lane, not counting the one running. */
  pendingPerLane?: number;
  /** Told of every start (with how long it waited) and every refusal: the sidecar's metrics. */
  observer?: LaneObserver;
}

export interface LaneObserver {
  started(lane: LaneName, waitedMs: number): void;
  refused(lane: LaneName, code: "lane_full" | "timeout"): void;
}

const LABEL: Record<LaneName, string> = { realtime: "real-time", bulk: "bulk" };

/** 529: the lane already holds its waiting executions; answered without waiting. */
export class LaneFullError extends ServiceError {
  override readonly name = "LaneFullError";
  constructor(
    readonly lane: LaneName,
    waiting: number,
  ) {
    super("lane_full", `${LABEL[lane]} lane is full (${waiting} waiting behind the running execution); refused after 0 ms`);
  }
}

/** 504: the GPU stayed occupied for the whole wait. */
export class LaneWaitTimeoutError extends ServiceError {
  override readonly name = "LaneWaitTimeoutError";
  constructor(
    readonly lane: LaneName,
    readonly waitedMs: number,
  ) {
    super("timeout", `${LABEL[lane]} execution waited ${waitedMs} ms and the GPU stayed occupied`);
  }
}

interface Waiter {
  readonly enqueued: number;
  /** Real-time starts seen while this entry waited; only read for bulk entries. */
  realtimeStarts: number;
  readonly timer: ReturnType<typeof setTimeout>;
  readonly start: () => void;
  /** Detaches the caller's abort listener once the entry leaves the queue. */
  readonly release: () => void;
}

export class Lanes {
  private readonly waitMs: number;
  private readonly realtimeBeforeBulk: number;
  private readonly pendingPerLane: number;
  private readonly observer: LaneObserver | undefined;
  private running: LaneName | null = null;
  private readonly waiting: Record<LaneName, Waiter[]> = { realtime: [], bulk: [] };

  constructor(options: LanesOptions = {}) {
    this.waitMs = options.waitMs ?? LIMITS.laneWaitMs;
    this.realtimeBeforeBulk = options.realtimeBeforeBulk ?? LIMITS.realtimeBeforeBulk;
    this.pendingPerLane = options.pendingPerLane ?? LIMITS.pendingPerLane;
    this.observer = options.observer;
    if (!(this.waitMs > 0)) throw new RangeError(`waitMs must be positive, got ${this.waitMs}`);
    for (const [name, value] of [
      ["realtimeBeforeBulk", this.realtimeBeforeBulk],
      ["pendingPerLane", this.pendingPerLane],
    ] as const) {
      if (!Number.isInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
    }
  }

  /**
   * Runs `work` on the GPU when its turn comes and settles with its outcome, unchanged.
   * Rejects with `LaneFullError` (529) at once when the lane is full, and with
   * `LaneWaitTimeoutError` (504) when the turn does not come within the wait, and with the signal's
   * reason when `signal` aborts while waiting; `work` is then never called.
   *
   *     await lanes.run("bulk", () => runtime.score(request));
   */
  run<T>(lane: LaneName, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    // Nothing waits while the slot is free: every settlement starts the next waiter in the same tick.
    if (this.running === null) {
      this.observer?.started(lane, 0);
      return this.start(lane, work);
    }

    const queue = this.waiting[lane];
    if (queue.length >= this.pendingPerLane) {
      this.observer?.refused(lane, "lane_full");
      return Promise.reject(new LaneFullError(lane, queue.length));
    }

    return new Promise<T>((resolve, reject) => {
      // Leaving the queue is all a timeout or an abort does: the running execution keeps the slot until it settles.
      const leave = (reason: unknown) => {
        queue.splice(queue.indexOf(waiter), 1);
        waiter.release();
        reject(reason);
      };
      const onAbort = () => {
        clearTimeout(waiter.timer);
        leave(signal?.reason);
      };
      const waiter: Waiter = {
        enqueued: Date.now(),
        realtimeStarts: 0,
        timer: setTimeout(() => {
          this.observer?.refused(lane, "timeout");
          leave(new LaneWaitTimeoutError(lane, Date.now() - waiter.enqueued));
        }, this.waitMs),
        start: () => {
          this.start(lane, work).then(resolve, reject);
        },
        release: () => signal?.removeEventListener("abort", onAbort),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
    });
  }

  /** Whether a real-time execution waits for the GPU: a bulk execution of several records hands the lane over between records then. */
  realtimeWaiting(): boolean {
    return this.waiting.realtime.length > 0;
  }

  /** What runs and how many wait in each lane, for health, metrics and tests. */
  snapshot(): LaneSnapshot {
    return {
      running: this.running,
      waiting: { realtime: this.waiting.realtime.length, bulk: this.waiting.bulk.length },
    };
  }

  private start<T>(lane: LaneName, work: () => Promise<T>): Promise<T> {
    this.running = lane;
    if (lane === "realtime") for (const waiter of this.waiting.bulk) waiter.realtimeStarts++;
    let execution: Promise<T>;
    try {
      execution = Promise.resolve(work());
    } catch (err) {
      // A synchronous throw is the same failure as a rejection, and must free the slot the same way.
      execution = Promise.reject(err);
    }
    return execution.finally(() => {
      this.running = null;
      this.startNext();
    });
  }

  private startNext(): void {
    const lane = this.nextLane();
    if (lane === null) return;
    const waiter = this.waiting[lane].shift();
    if (waiter === undefined) return;
    clearTimeout(waiter.timer);
    waiter.release();
    this.observer?.started(lane, Date.now() - waiter.enqueued);
    waiter.start();
  }

  /** Real-time first, so interactive callers are not stuck behind batch work; bulk is owed a turn after its quota. */
  private nextLane(): LaneName | null {
    const realtime = this.waiting.realtime[0];
    const bulk = this.waiting.bulk[0];
    if (bulk === undefined) return realtime === undefined ? null : "realtime";
    if (realtime === undefined) return "bulk";
    return bulk.realtimeStarts >= this.realtimeBeforeBulk ? "bulk" : "realtime";
  }
}
