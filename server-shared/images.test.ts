import { describe, expect, it } from "vitest";
import { LIMITS } from "../contract/limits.ts";
import { readGrantMs } from "./images.ts";

describe("read grants of an image", () => {
  const now = Date.parse("2026-11-25T12:00:00Z");
  it("last at most 10 minutes", () => {
    expect(LIMITS.imageReadGrantMs).toBe(10 * 60 * 1000);
    expect(readGrantMs(now, now + 24 * 3600_000, now + 3600_000)).toBe(LIMITS.imageReadGrantMs);
  });
  it("never outlive the asset or the lease they serve, in whole seconds", () => {
    expect(readGrantMs(now, now + 90_500, now + 3600_000)).toBe(90_000);
    expect(readGrantMs(now, now + 3600_000, now + 59_999)).toBe(59_000);
    expect(readGrantMs(now, now + 999, now + 3600_000)).toBe(0);
    expect(readGrantMs(now, now - 5000, now + 3600_000)).toBe(0);
  });
});
