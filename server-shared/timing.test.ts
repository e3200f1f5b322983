import { describe, expect, it } from "vitest";
import { Timings } from "./timing.ts";

describe("Timings", () => {
  it("adds repeated hops, writes a Server-Timing header, and reads it back", async () => {
    const timings = new Timings();
    timings.add("score", 1.5);
    timings.add("score", 2.25);
    await timings.time("usage", async () => undefined);
    expect(timings.get("score")).toBe(3.75);
    expect(timings.header()).toMatch(/^score;dur=3\.75, usage;dur=\d+\.\d\d$/);
    expect(Timings.parse(timings.header()).get("score")).toBe(3.75);
  });

  it("counts overlapping work of one name once: the time any of it was running", async () => {
    let clock = 0;
    const timings = new Timings(() => clock);
    const gate = () => {
      let open!: () => void;
      return { done: new Promise<void>((resolve) => (open = resolve)), open: () => open() };
    };
    const [first, second] = [gate(), gate()];
    const a = timings.time("score", () => first.done); // starts at 0
    clock = 20;
    const b = timings.time("score", () => second.done); // starts at 20, while the first runs
    clock = 60;
    first.open();
    await a;
    clock = 80;
    second.open();
    await b;
    // Running from 0 to 80: 80 ms, not 60 + 60.
    expect(timings.get("score")).toBe(80);
    clock = 100;
    await timings.time("score", async () => void (clock = 105));
    expect(timings.get("score")).toBe(85);
  });

  it("times work that throws", async () => {
    const timings = new Timings();
    await expect(timings.time("key", () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(timings.get("key")).toBeGreaterThanOrEqual(0);
  });

  it("reads only well-formed entries, and merges another component's", () => {
    const parsed = Timings.parse('queue;dur=3, bad name;dur=1, x;desc="no dur", NaN;dur=x, neg;dur=-1, db;desc="pg";dur=0.5');
    expect([...parsed]).toEqual([
      ["queue", 3],
      ["db", 0.5],
    ]);
    const timings = new Timings();
    timings.merge(parsed);
    expect(timings.header()).toBe("queue;dur=3.00, db;dur=0.50");
    expect(Timings.parse(null).size).toBe(0);
  });

  it("refuses a name that is not a short lowercase token, so nothing else can ride in the header", () => {
    expect(() => new Timings().add("ticket: refund", 1)).toThrow(RangeError);
  });
});
