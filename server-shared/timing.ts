/**
 * Per-hop timings as the components record them, carried in `Server-Timing` headers (W3C Server
 * Timing): the sidecar names its own hops on its answer to the edge, and the edge adds its own and
 * passes both on. Names and milliseconds only: never a body, a key or an address.
 *
 *     const timings = new Timings();
 *     const row = await timings.time("key", () => lookUpKey());
 *     timings.add("queue", 3.2);
 *     res.headers.set("server-timing", timings.header()); // "key;dur=1.84, queue;dur=3.2"
 *     Timings.parse("key;dur=1.84, queue;dur=3.2");       // Map { "key" => 1.84, "queue" => 3.2 }
 */

export const SERVER_TIMING_HEADER = "server-timing";

/** Names a component may record: the hops of the real-time path. */
const NAME = /^[a-z][a-z0-9-]{0,31}$/;

export class Timings {
  private readonly entries = new Map<string, number>();
  /** Timed work in progress, by name: how many, and since when the first of them runs. */
  private readonly open = new Map<string, { count: number; since: number }>();

  /** `now`: the clock, in milliseconds (a test may pass its own). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Adds `ms` to `name` (a hop taken several times, such as one score per pass, adds up). */
  add(name: string, ms: number): void {
    if (!NAME.test(name)) throw new RangeError(`timing name ${JSON.stringify(name)} is not a short lowercase token`);
    if (!Number.isFinite(ms) || ms < 0) return;
    this.entries.set(name, (this.entries.get(name) ?? 0) + ms);
  }

  /**
   * Runs `work` and adds the time it took to `name`, whether it succeeds or throws. Work of one name
   * that overlaps (passes sent while another is evaluated) counts the time any of it was running,
   * once.
   */
  async time<T>(name: string, work: () => Promise<T>): Promise<T> {
    const open = this.open.get(name) ?? { count: 0, since: this.now() };
    open.count += 1;
    this.open.set(name, open);
    try {
      return await work();
    } finally {
      open.count -= 1;
      if (open.count === 0) {
        this.open.delete(name);
        this.add(name, this.now() - open.since);
      }
    }
  }

  /** Adds every entry of another set (the timings a downstream hop reported). */
  merge(other: ReadonlyMap<string, number>): void {
    for (const [name, ms] of other) if (NAME.test(name)) this.add(name, ms);
  }

  get(name: string): number | undefined {
    return this.entries.get(name);
  }

  /** The `Server-Timing` header value, durations in milliseconds with two decimals. */
  header(): string {
    return [...this.entries].map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`).join(", ");
  }

  /** The entries of a `Server-Timing` header that carry a name and a duration; anything else is ignored. */
  static parse(header: string | null | undefined): Map<string, number> {
    const out = new Map<string, number>();
    for (const part of (header ?? "").split(",")) {
      const [name, ...params] = part.trim().split(";");
      const dur = params.map((p) => p.trim()).find((p) => p.startsWith("dur="));
      const ms = dur === undefined ? NaN : Number(dur.slice(4));
      if (name && NAME.test(name) && Number.isFinite(ms) && ms >= 0) out.set(name, ms);
    }
    return out;
  }
}
