import { describe, expect, it } from "vitest";
import { checkLink } from "./health.ts";

describe("checkLink", () => {
  it("reports a passing probe with its detail and latency", async () => {
    const status = await checkLink("a->b", async () => "fine");
    expect(status).toMatchObject({ name: "a->b", ok: true, detail: "fine" });
    expect(status.latency_ms).toBeGreaterThanOrEqual(0);
  });

  it("reports why a failing probe failed", async () => {
    const status = await checkLink("a->b", async () => {
      throw new Error("connection refused");
    });
    expect(status).toMatchObject({ name: "a->b", ok: false, error: "connection refused" });
  });

  it("reports a probe that never answers as down once its deadline passes", async () => {
    const status = await checkLink("a->b", () => new Promise(() => {}), 50);
    expect(status.ok).toBe(false);
    expect(status.error).toMatch(/no answer within 50 ms/);
    expect(status.latency_ms).toBeGreaterThanOrEqual(45);
  });
});
