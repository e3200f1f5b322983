/**
 * The job worker loop (runs in the sidecar, one per kind of job): claims jobs of its kind from
 * Postgres with leases, so several sidecars share one queue with no coordinator, and runs each
 * claim's step. What a kind does is its `JobSteps` (bulk/steps.ts, train/steps.ts); the lease and its
 * fence are the job store's (server-shared/jobs/store.ts).
 *
 * - A claim lasts `leaseMs` and is renewed every `renewMs` while its step runs; the step's signal
 *   aborts when a renewal finds the lease gone (expired and taken, job cancelled, account disabled).
 *   After one step the job is released (or its commit released it), so jobs and hosts take turns; a
 *   crashed worker's job is claimed again once its lease has expired.
 * - A step's commit may make the worker's next claim in the same round trip (bulk): it is the next
 *   turn's claim.
 * - Waking: an idle worker looks for work again every `idleMs`, or at once when `wake()` is called
 *   (the edge calls the sidecar's wake route when a job is submitted, edge/wake.ts). A wake during a
 *   claim that found nothing makes it look again without waiting: the job may have been committed
 *   after that claim read. A wake is only a hint: a lost one costs at most `idleMs`.
 * - Stopping: no claim is made, no lease renewed; without `drain` the step in flight is abandoned
 *   (nothing of it commits), with it the step may finish and commit until `drain` aborts, within the
 *   lease it holds (at least `leaseMs - renewMs` is left of it). Either way its job is released.
 * - Expiry, completion after a crash, the credit sweep and retention are the sweeper's (sweeper.ts).
 *
 *     const worker = new JobWorker(new BulkSteps(deps), { timing: JOB_TIMING });
 *     worker.start();
 *     await worker.stop({ drain: AbortSignal.timeout(25_000) }); // on SIGTERM
 */
import { LIMITS } from "../../contract/limits.ts";
import type { Lease } from "../../server-shared/jobs/store.ts";
import { loggable } from "../../server-shared/errors.ts";

export interface JobTiming {
  leaseMs: number;
  renewMs: number;
  /** How long an idle worker waits before looking for work again. */
  idleMs: number;
}

export const JOB_TIMING: JobTiming = {
  leaseMs: LIMITS.jobLeaseMs,
  renewMs: LIMITS.jobLeaseRenewMs,
  idleMs: 500,
};

/** What a step may ask the worker: whether it is stopping now (a stopping worker makes no next claim), and the lease length. */
export interface StepTurn {
  stopping: () => boolean;
  leaseMs: number;
}

/** What a kind of job does under a held claim: its claim, and one step. */
export interface JobSteps<C extends Lease> {
  /** The kind's name in log lines. */
  name: string;
  /** Leases the kind's job that waited longest and has work this sidecar can do; null: none. */
  claim(leaseMs: number): Promise<C | null>;
  renew(claim: C, leaseMs: number): Promise<boolean>;
  release(claim: C): Promise<void>;
  /**
   * One step under the held claim. `{ released: next }`: the step's commit released the lease itself,
   * and made the next claim when `next` is one (it is the worker's next turn). Anything else: the
   * worker releases the job.
   */
  step(claim: C, signal: AbortSignal, turn: StepTurn): Promise<{ released: C | null } | void>;
  /** Called when the worker stops: work prepared ahead is dropped. */
  stop?(): void;
}

export class JobWorker {
  private readonly timing: JobTiming;
  private readonly log: (line: string) => void;
  private readonly steps: JobSteps<Lease>;
  private stopping = false;
  private current: AbortController | null = null;
  private loop: Promise<void> | null = null;
  /** A wake came since the last claim began: the next idle wait is skipped. */
  private woken = false;
  /** The idle wait in progress, if any: whether a wake ends it, and how to end it. */
  private waiting: { wakeable: boolean; end: () => void } | null = null;

  /** `steps`: the kind's steps (a kind's claim type is its own: methods take it back bivariantly). */
  constructor(steps: JobSteps<Lease>, opts: { timing?: JobTiming; log?: (line: string) => void } = {}) {
    this.steps = steps;
    this.timing = opts.timing ?? JOB_TIMING;
    this.log = opts.log ?? ((line) => console.error(line));
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Looks for work now: ends an idle wait, or skips the next one when a claim is under way. */
  wake(): void {
    this.woken = true;
    if (this.waiting?.wakeable) this.waiting.end();
  }

  /** Stops claiming and renewing; the step in flight finishes until `drain` aborts (at once without it). Resolves when the loop has ended. */
  async stop(opts: { drain?: AbortSignal } = {}): Promise<void> {
    this.stopping = true;
    this.waiting?.end();
    this.steps.stop?.();
    const abandon = () => this.current?.abort(new Error("the worker is stopping"));
    if (!opts.drain || opts.drain.aborted) abandon();
    else opts.drain.addEventListener("abort", abandon, { once: true });
    await this.loop;
  }

  private async run(): Promise<void> {
    let next: Lease | null = null;
    while (!this.stopping) {
      try {
        const claim = next ?? (await this.claim());
        next = null;
        if (!claim) {
          await this.idle();
          continue;
        }
        // A claim made while the worker was told to stop is handed back untouched.
        if (this.stopping) {
          await this.release(claim);
          break;
        }
        next = await this.step(claim);
      } catch (err) {
        // Postgres away, a bug: say so without content, wait (a wake does not shorten it), go on. A held lease simply expires.
        if (!this.stopping) this.log(`sidecar: ${this.steps.name} worker: ${loggable(err)}`);
        await this.idle({ wakeable: false });
      }
    }
    if (next) await this.release(next);
  }

  /** The kind's next claim; null when there is no work. */
  private async claim(): Promise<Lease | null> {
    this.woken = false;
    return this.steps.claim(this.timing.leaseMs);
  }

  /** One step, renewing the lease meanwhile (not once stopping); the job is released afterwards unless its commit did. */
  private async step(claim: Lease): Promise<Lease | null> {
    const steps = this.steps;
    const abort = new AbortController();
    this.current = abort;
    const renewal = setInterval(() => {
      if (this.stopping) return;
      steps
        .renew(claim, this.timing.leaseMs)
        .then((held) => {
          if (!held) abort.abort(new Error("the claim was lost"));
        })
        .catch(() => undefined);
    }, this.timing.renewMs);
    let outcome: { released: Lease | null } | void = undefined;
    try {
      outcome = await steps.step(claim, abort.signal, { stopping: () => this.stopping, leaseMs: this.timing.leaseMs });
    } catch (err) {
      // Abandoned or lost: nothing of the step may commit, and its error is not one.
      if (!abort.signal.aborted) throw err;
    } finally {
      clearInterval(renewal);
      this.current = null;
      if (!outcome) await this.release(claim);
    }
    return outcome?.released ?? null;
  }

  /** Ends a claim without a commit. */
  private async release(claim: Lease): Promise<void> {
    await this.steps.release(claim).catch(() => undefined);
  }

  /** Waits `idleMs`, less when stopping; a wakeable wait ends at a wake, and is skipped when one came since the last claim began. */
  private async idle({ wakeable } = { wakeable: true }): Promise<void> {
    if (this.stopping || (wakeable && this.woken)) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(end, this.timing.idleMs);
      function end(): void {
        clearTimeout(timer);
        resolve();
      }
      this.waiting = { wakeable, end };
    });
    this.waiting = null;
  }
}
