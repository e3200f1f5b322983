/**
 * The store of content-free readings (content-free.ts): bounded, least recently read first out, and
 * emptied of a runtime's old fingerprint when that runtime shows a new one. Pure: no runtime needed
 * (test/decide.test.ts shows the store at work on the real runtime).
 */
import { describe, expect, it } from "vitest";
import { ContentFreeReadings, contentFreeKey } from "./content-free.ts";
import { renderNoul, SERVED_RENDERING, CONTENT_FREE_STATE } from "./render.ts";

const runtime = { id: "r1", fingerprint: "a".repeat(64) };
const pass = (instructions: string) => renderNoul(SERVED_RENDERING, CONTENT_FREE_STATE, { type: "noul", instructions });

describe("content-free readings", () => {
  it("returns what was kept for the same runtime and rendered pass, and nothing for another pass or fingerprint", () => {
    const store = new ContentFreeReadings();
    const key = contentFreeKey(pass("Is it about money?"));
    expect(store.get(runtime, key)).toBeUndefined();
    store.set(runtime, key, [-0.5, -1.5]);
    expect(store.get(runtime, key)).toEqual([-0.5, -1.5]);
    expect(store.get(runtime, contentFreeKey(pass("Is it about money? ")))).toBeUndefined();
    expect(store.get({ id: "r2", fingerprint: "b".repeat(64) }, key)).toBeUndefined();
    expect([store.hits, store.misses]).toEqual([1, 3]);
  });

  it("keys on the whole rendered pass: its segments, its prefix and its labels", () => {
    const base = pass("Is it late?");
    const keys = new Set([
      contentFreeKey(base),
      contentFreeKey({ ...base, prefixSegments: 0 }),
      contentFreeKey({ ...base, labels: [["Yes"], ["No"]] }),
      contentFreeKey({ ...base, segments: base.segments.map((s) => ({ ...s, special: true })) }),
    ]);
    expect(keys.size).toBe(4);
  });

  it("holds at most its byte budget, the least recently read entry going first", () => {
    const key = (i: number) => contentFreeKey(pass(`question ${i}`));
    const one = 64 + 2 * (65 + key(0).length) + 16;
    const store = new ContentFreeReadings(3 * one + 10);
    for (const i of [0, 1, 2]) store.set(runtime, key(i), [-1, -2]);
    expect(store.get(runtime, key(0))).toBeDefined(); // 0 is now the most recently read
    store.set(runtime, key(3), [-1, -2]);
    expect(store.count).toBe(3);
    expect(store.get(runtime, key(1))).toBeUndefined();
    for (const i of [0, 2, 3]) expect(store.get(runtime, key(i))).toBeDefined();
    expect(store.bytes).toBeLessThanOrEqual(3 * one + 10);
    // An entry larger than the whole budget is not kept.
    const tiny = new ContentFreeReadings(10);
    tiny.set(runtime, key(0), [-1]);
    expect(tiny.count).toBe(0);
  });

  it("drops a runtime's entries when that runtime shows another fingerprint", () => {
    const store = new ContentFreeReadings();
    const other = { id: "r2", fingerprint: "c".repeat(64) };
    store.set(runtime, "k1", [-1]);
    store.set(runtime, "k2", [-1]);
    store.set(other, "k1", [-2]);
    const renewed = { id: "r1", fingerprint: "d".repeat(64) };
    expect(store.get(renewed, "k1")).toBeUndefined();
    expect(store.count).toBe(1);
    expect(store.get(other, "k1")).toEqual([-2]);
    // Back to the old fingerprint: nothing of it was kept.
    expect(store.get(runtime, "k1")).toBeUndefined();
  });
});
