import { describe, expect, it } from "vitest";
import { Turns } from "./turns.ts";

/** A unit of work that runs until `finish` is called, recording when it started. */
function unit(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { work: () => (log.push(name), done.then(() => name)), finish };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("the runtime's turns", () => {
  it("run one at a time: urgent ones before the waiting others, each class in arrival order, the running one never interrupted", async () => {
    const turns = new Turns();
    const log: string[] = [];
    const [a, b, c, r1, r2] = ["a", "b", "c", "r1", "r2"].map((name) => unit(log, name));
    const results = [turns.run(a!.work), turns.run(b!.work), turns.run(r1!.work, true), turns.run(c!.work), turns.run(r2!.work, true)];
    await settle();
    expect(log).toEqual(["a"]);
    for (const u of [a, r1, r2, b, c]) {
      u!.finish();
      await settle();
    }
    expect(log).toEqual(["a", "r1", "r2", "b", "c"]);
    expect(await Promise.all(results)).toEqual(["a", "b", "r1", "c", "r2"]);
  });

  it("go on after a unit fails, and give the failure to its caller alone", async () => {
    const turns = new Turns();
    const failed = turns.run(async () => {
      throw new Error("decode failed");
    });
    const next = turns.run(async () => "next");
    await expect(failed).rejects.toThrow("decode failed");
    await expect(next).resolves.toBe("next");
    // A unit that throws before returning a promise is a failure like any other.
    await expect(turns.run((() => { throw new Error("at once"); }) as () => Promise<never>, true)).rejects.toThrow("at once");
    await expect(turns.run(async () => 1)).resolves.toBe(1);
  });
});
