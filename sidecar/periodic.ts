/**
 * A background loop of the sidecar (the sweeper, the webhook sender): `tick` runs again at once
 * while it reports more to do, otherwise after `everyMs`; a tick that throws (Postgres away, a bug)
 * is logged without content and the loop goes on. `wake` runs the next tick at once (a wake during a
 * tick skips the wait after it, so none is lost). `stop` wakes a waiting loop and resolves once the
 * tick in flight has finished.
 *
 *     const loop = new Periodic("sidecar: sweeper", SWEEP_EVERY_MS, async () => { await sweep(); return false; }, log);
 *     loop.start();
 *     loop.wake();
 *     await loop.stop();
 */
import { loggable } from "../server-shared/errors.ts";

export class Periodic {
  private loop: Promise<void> | null = null;
  private stopping = false;
  /** A wake came since the tick in flight began: the wait after it is skipped. */
  private woken = false;
  private interrupt: (() => void) | null = null;

  constructor(
    private readonly name: string,
    private readonly everyMs: number,
    /** One turn; true when there is more to do at once. */
    private readonly tick: () => Promise<boolean>,
    private readonly log: (line: string) => void,
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Runs the next tick now: ends the wait in progress, or skips the one after the tick in flight. */
  wake(): void {
    this.woken = true;
    this.interrupt?.();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.interrupt?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      let more = false;
      let failed = false;
      try {
        more = await this.tick();
      } catch (err) {
        failed = true;
        this.log(`${this.name}: ${loggable(err)}`);
      }
      // A failed tick waits its period whatever woke it, so that a fault is not retried in a tight loop.
      if (more || (this.woken && !failed) || this.stopping) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.everyMs);
        this.interrupt = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.interrupt = null;
    }
  }
}
