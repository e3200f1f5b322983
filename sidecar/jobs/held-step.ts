/**
 * What the sidecar's job workers (bulk/worker.ts, train/worker.ts) share: one step at a time under
 * a held lease, renewed while the step runs, and a stop that lets the step in flight finish or
 * abandons it.
 *
 *     const steps = new HeldSteps();
 *     const result = await steps.run(() => store.renew(claim, leaseMs), renewMs, (signal) => work(claim, signal));
 *     // undefined: the step was abandoned (the worker stops) or its lease was lost; nothing of it may commit
 *     await steps.stop(loop, drain);
 */
export class HeldSteps {
  /** Set by `stop`: the worker claims nothing more and renews no lease. */
  stopping = false;
  private current: AbortController | null = null;

  /**
   * Runs `work`, renewing the lease every `renewMs` (not once the worker is stopping: it keeps what
   * it has and renews nothing it might not keep). `work`'s signal aborts when a renewal finds the
   * lease gone (expired and taken, job cancelled, account disabled) or the worker abandons the step;
   * the step's result is then undefined and its error, if any, swallowed.
   */
  async run<T>(renew: () => Promise<boolean>, renewMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    const abort = new AbortController();
    this.current = abort;
    const renewal = setInterval(() => {
      if (this.stopping) return;
      renew()
        .then((held) => {
          if (!held) abort.abort(new Error("the claim was lost"));
        })
        .catch(() => undefined);
    }, renewMs);
    try {
      return await work(abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return undefined;
      throw err;
    } finally {
      clearInterval(renewal);
      this.current = null;
    }
  }

  /**
   * Stops claiming, and renews no lease from now on. Without `drain`, a step in flight is abandoned
   * (nothing of it commits); with it, the step may finish and commit until `drain` aborts, within the
   * lease it holds. Resolves when the worker's `loop` has ended.
   */
  async stop(loop: Promise<void> | null, drain?: AbortSignal): Promise<void> {
    this.stopping = true;
    const abandon = () => this.current?.abort(new Error("the worker is stopping"));
    if (!drain || drain.aborted) abandon();
    else drain.addEventListener("abort", abandon, { once: true });
    await loop;
  }
}
