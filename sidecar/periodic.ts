/**
 * A background loop of the sidecar (the sweeper, the webhook sender): `tick` runs again at once
 * while it reports more to do, otherwise after `everyMs`; a tick that throws (Postgres away, a bug)
 * is logged without content and the loop goes on. `stop` wakes a waiting loop and resolves once the
 * tick in flight has finished.
 *
 *     const loop = new Periodic("sidecar: sweeper", SWEEP_EVERY_MS, async () => { await sweep(); return false; }, log);
 *     loop.start();
 *     await loop.stop();
 */
import { loggable } from "../server-shared/errors.ts";

export class Periodic {
  private loop: Promise<void> | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;

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

  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let more = false;
      try {
        more = await this.tick();
      } catch (err) {
        this.log(`${this.name}: ${loggable(err)}`);
      }
      if (more) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.everyMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }
}
