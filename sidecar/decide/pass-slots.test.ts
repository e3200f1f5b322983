/**
 * The slots the background's records share (passes.ts PassSlots, bulk/records.ts BulkFlow): never
 * more held than its capacity, and a freed slot goes to the lowest-ranked waiting caller first.
 */
import { describe, expect, it } from "vitest";
import { PassSlots } from "./passes.ts";

describe("pass slots", () => {
  it("hold at most their capacity in flight and hand a freed slot to the lowest rank, the earliest among equals", async () => {
    const slots = new PassSlots(2);
    const started: string[] = [];
    const take = (name: string, rank: number) => slots.acquire(rank).then(() => void started.push(name));
    await take("a0", 0);
    await take("b0", 1);
    const waiting = [take("c0", 2), take("b1", 1), take("a1", 0), take("b2", 1)];
    await Promise.resolve();
    expect(started).toEqual(["a0", "b0"]);
    // Each release starts exactly one waiting pass.
    for (const expected of ["a1", "b1", "b2", "c0"]) {
      slots.release();
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(started.at(-1)).toBe(expected);
    }
    await Promise.all(waiting);
    expect(started).toEqual(["a0", "b0", "a1", "b1", "b2", "c0"]);
    // With nothing waiting, released slots are free again: two more start at once.
    slots.release();
    slots.release();
    await Promise.all([take("d", 5), take("e", 5)]);
    expect(started.slice(-2)).toEqual(["d", "e"]);
  });
});
