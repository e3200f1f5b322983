/**
 * The runtime's one queue of work (runs in the runtime): one unit of work at a time, as a device runs
 * one decode at a time, and among the units waiting, urgent ones (a real-time call's) before the
 * others (the background's), each class in the order it arrived. A unit already running is never
 * interrupted, so urgent work waits behind at most the one unit that runs when it arrives.
 *
 *     const turns = new Turns();
 *     await turns.run(() => evaluate(chunk));         // background: one chunk of a group
 *     await turns.run(() => evaluate(request), true); // real time: ahead of every background unit waiting
 */
interface Waiting {
  urgent: boolean;
  start: () => void;
}

export class Turns {
  private running = false;
  private readonly waiting: Waiting[] = [];

  /** Runs `work` once every unit ahead of it has finished; its result or its error. */
  run<T>(work: () => Promise<T>, urgent = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const start = () => {
        void Promise.resolve()
          .then(work)
          .then(resolve, reject)
          .finally(() => this.next());
      };
      if (!this.running) {
        this.running = true;
        start();
        return;
      }
      const at = urgent ? this.waiting.findIndex((w) => !w.urgent) : -1;
      this.waiting.splice(at === -1 ? this.waiting.length : at, 0, { urgent, start });
    });
  }

  private next(): void {
    const waiting = this.waiting.shift();
    if (waiting) waiting.start();
    else this.running = false;
  }
}
