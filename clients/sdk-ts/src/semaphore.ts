/**
 * A counting semaphore, first come first served. The client holds one permit per request in flight
 * (from sending it to reading the last byte of its answer), so one client never has more than
 * `LIMITS.httpConnectionsPerService` requests, and so connections, open to the service.
 *
 *     const release = await semaphore.acquire(signal);
 *     try { await send(); } finally { release(); }
 */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError("a semaphore needs at least one permit");
  }

  /** Requests in flight now (for tests and diagnostics). */
  get inFlight(): number {
    return this.active;
  }

  /** Waits for a permit; returns the function that gives it back (calling it twice gives back one). */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.active < this.size) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", abort);
        resolve(this.releaser());
      };
      const abort = () => {
        const at = this.waiting.indexOf(grant);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", abort, { once: true });
      this.waiting.push(grant);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The permit passes straight to the next waiter, so `active` stays as it is.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    };
  }
}
