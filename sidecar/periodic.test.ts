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
});
