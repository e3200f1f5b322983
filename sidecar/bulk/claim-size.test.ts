/**
 * How many records a bulk claim takes (claim-size.ts): enough for about LIMITS.bulkExecutionMs of
 * runtime time at the pace recent executions ran, one with CPU passes, never more than the limit.
 */
import { describe, expect, it } from "vitest";
import { LIMITS } from "../../contract/limits.ts";
import { ClaimSize, fixedClaimSize } from "./claim-size.ts";

describe("a bulk claim's size", () => {
  it("is one record until an execution has been timed, and one while a record takes a CPU pass (about 100 ms)", () => {
    const size = new ClaimSize();
    expect(size.records()).toBe(1);
    size.ran(95, 1);
    expect(size.records()).toBe(1);
    size.ran(250, 2);
    expect(size.records()).toBe(1);
  });

  it("fills the execution time with millisecond passes, and follows a change of pace", () => {
    const size = new ClaimSize();
    size.ran(2.5, 1);
    expect(size.records()).toBe(Math.floor(LIMITS.bulkExecutionMs / 2.5));
    // The runtime slows down (a longer state, a busier GPU): claims shrink within a few executions.
    for (let i = 0; i < 10; i++) size.ran(10 * 3, 3);
    expect(size.records()).toBe(Math.floor(LIMITS.bulkExecutionMs / 10));
  });

  it("never takes more than the limit, however fast the passes, and ignores a sample of no records", () => {
    const size = new ClaimSize();
    size.ran(0, 4);
    expect(size.records()).toBe(LIMITS.bulkClaimRecords);
    size.ran(50, 0);
    size.ran(Number.NaN, 1);
    expect(size.records()).toBe(LIMITS.bulkClaimRecords);
  });

  it("is fixed when a test sets it", () => {
    const fixed = fixedClaimSize(5);
    fixed.ran(1000, 1);
    expect(fixed.records()).toBe(5);
  });
});
