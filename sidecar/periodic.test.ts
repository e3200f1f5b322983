import { describe, expect, it } from "vitest";
import { Periodic } from "./periodic.ts";

describe("Periodic", () => {
  it("runs again at once while a tick reports more, waits otherwise, logs a failed tick without its message, and stops after the tick in flight", async () => {
    const lines: string[] = [];
    const ticks: number[] = [];
    let finished = 0;
    const loop = new Periodic("sidecar: test loop", 60_000, async () => {
      ticks.push(Date.now());
      if (ticks.length === 3) throw new SyntaxError(`Unexpected token in "customer text"`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      finished++;
      return ticks.length < 3;
    }, (line) => lines.push(line));
    loop.start();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Two turns that had more to do, the third threw: then the loop waits its minute.
    expect(ticks).toHaveLength(3);
    expect(lines).toEqual(["sidecar: test loop: SyntaxError (its text not logged)"]);
    const started = Date.now();
    await loop.stop();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(finished).toBe(2);
  });

  it("runs at once when woken, even by a wake that came during a tick, and stops during a tick without waiting its period", async () => {
    let ticks = 0;
    let hold = false;
    let release: () => void = () => {};
    const loop = new Periodic("sidecar: test loop", 60_000, async () => {
      ticks++;
      if (hold) await new Promise<void>((resolve) => (release = resolve));
      return false;
    }, () => {});
    const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
    loop.start();
    await settle();
    expect(ticks).toBe(1);
    // Woken while waiting its minute: the next tick runs now; a wake during that tick is not lost.
    hold = true;
    loop.wake();
    await settle();
    expect(ticks).toBe(2);
    loop.wake();
    hold = false;
    release();
    await settle();
    expect(ticks).toBe(3);

    hold = true;
    loop.wake();
    await settle();
    const started = Date.now();
    const stopped = loop.stop();
    release();
    await stopped;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(ticks).toBe(4);
  });
});
