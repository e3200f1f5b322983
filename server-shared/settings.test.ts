import { describe, expect, it } from "vitest";
import { EdgeSettings } from "../edge/settings.ts";
import { LIMITS } from "../contract/limits.ts";
import { SidecarSettings } from "../sidecar/settings.ts";
import { TestSettings, tuningOf } from "../test/support/sidecar-main.ts";
import { parseSettings, SettingsError } from "./settings.ts";

const sidecar = {
  SIDECAR_SECRET: "s",
  SIDECAR_URL: "http://127.0.0.1:9100",
  SIDECAR_PORT: "9100",
  DATABASE_URL: "postgres://u:p@ep-quiet-lake-123456.us-east-2.aws.neon.tech/db?sslmode=require",
  EDGE_URL: "http://127.0.0.1:8787",
  UPSTASH_REDIS_REST_URL: "http://127.0.0.1:8079",
  UPSTASH_REDIS_REST_TOKEN: "t",
};

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(SettingsError);
    return (err as Error).message;
  }
  throw new Error("expected the settings to be refused");
}

describe("parseSettings", () => {
  it("parses a tier's settings once, with defaults and numbers", () => {
    const settings = parseSettings("sidecar", SidecarSettings, sidecar);
    expect(settings).toMatchObject({ SIDECAR_PORT: 9100, SIDECAR_HOST: "127.0.0.1", JOB_WORKERS: "on" });
    expect(settings.NEON_LOCAL_BRIDGE).toBeUndefined();
    expect(parseSettings("sidecar", SidecarSettings, { ...sidecar, JOB_WORKERS: "off" })).toMatchObject({ JOB_WORKERS: "off" });
    // A test's setting is no setting of the production sidecar.
    expect(parseSettings("sidecar", SidecarSettings, { ...sidecar, SVC_TEST_JOB_LEASE_MS: "2000" })).not.toHaveProperty("SVC_TEST_JOB_LEASE_MS");
  });

  it("refuses the old name of a renamed setting, so that its value is never silently dropped", () => {
    expect(refusal(() => parseSettings("sidecar", SidecarSettings, { ...sidecar, BULK_WORKER: "off" }))).toBe("sidecar: setting BULK_WORKER was renamed JOB_WORKERS");
  });

  it("takes the test entry's periods only shorter than the specification's (test/support/sidecar-main.ts)", () => {
    expect(parseSettings("sidecar", TestSettings, { SVC_TEST_JOB_LEASE_MS: "2000" })).toMatchObject({ SVC_TEST_JOB_LEASE_MS: 2000, SVC_TEST_SHARED_WORK: "on" });
    expect(() => parseSettings("sidecar", TestSettings, { SVC_TEST_JOB_LEASE_MS: "999999999" })).toThrow(/SVC_TEST_JOB_LEASE_MS must be an integer/);
    const tuning = tuningOf(parseSettings("sidecar", TestSettings, { SVC_TEST_JOB_LEASE_MS: "2000", SVC_TEST_METADATA_RETENTION_MS: "0" }));
    expect(tuning.jobTiming).toEqual({ leaseMs: 2000 });
    expect(tuning.sweeperTiming).toEqual({ retention: { dataMs: LIMITS.bulkDataRetentionMs, metadataMs: 0 } });
    expect(tuning.afterImageAnswer).toBeUndefined();
    expect(tuning.steps).toBeUndefined();
  });

  it("names every missing or bad setting in one line, prefixed by the tier, and never echoes a value", () => {
    const message = refusal(() =>
      parseSettings("sidecar", SidecarSettings, { ...sidecar, SIDECAR_DRAIN_MS: "", UPSTASH_REDIS_REST_TOKEN: "", SIDECAR_PORT: "70000", SIDECAR_URL: "http://gpu.example.com:9100" }),
    );
    expect(message).toMatch(/^sidecar: /);
    expect(message).toContain("setting UPSTASH_REDIS_REST_TOKEN is required");
    expect(message).toContain("setting SIDECAR_PORT must be an integer from 0 to 65535");
    expect(message).toMatch(/setting SIDECAR_URL is not allowed: .*plaintext/);
    expect(message).not.toContain("postgres://");
  });

  it("route a remote DATABASE_URL to Neon's own endpoints only, and a loopback one only through the local bridge", () => {
    const local = { ...sidecar, DATABASE_URL: "postgres://u:p@127.0.0.1:5432/svc" };
    expect(parseSettings("sidecar", SidecarSettings, { ...local, NEON_LOCAL_BRIDGE: "127.0.0.1:6543" }).NEON_LOCAL_BRIDGE).toBe("127.0.0.1:6543");
    // The bug this guards: a launcher that hands a real database's tiers the local bridge.
    expect(refusal(() => parseSettings("sidecar", SidecarSettings, { ...sidecar, NEON_LOCAL_BRIDGE: "127.0.0.1:6543" }))).toBe(
      "sidecar: setting NEON_LOCAL_BRIDGE must be unset for a remote DATABASE_URL, which is reached at Neon's own endpoints",
    );
    expect(refusal(() => parseSettings("sidecar", SidecarSettings, local))).toMatch(/setting NEON_LOCAL_BRIDGE is required for a loopback DATABASE_URL/);
    expect(refusal(() => parseSettings("sidecar", SidecarSettings, { ...local, NEON_LOCAL_BRIDGE: "db.example.com:6543" }))).toMatch(/NEON_LOCAL_BRIDGE must be a loopback host:port/);
    expect(refusal(() => parseSettings("sidecar", SidecarSettings, { ...sidecar, DATABASE_URL: "not a url" }))).toMatch(/setting DATABASE_URL is not a valid postgres:\/\/ URL/);
  });

  it("refuses an edge without its identity provider or with a remote plaintext Redis", () => {
    const message = refusal(() =>
      parseSettings("edge", EdgeSettings, {
        DATABASE_URL: "postgres://x",
        UPSTASH_REDIS_REST_URL: "http://redis.example.com",
        UPSTASH_REDIS_REST_TOKEN: "t",
        SIDECAR_SECRET: "s",
        OIDC_ISSUER: "https://login.example.com/",
        OIDC_JWKS_URL: "https://login.example.com/jwks",
      }),
    );
    expect(message).toContain("setting OIDC_AUDIENCE is required");
    expect(message).toMatch(/setting UPSTASH_REDIS_REST_URL is not allowed/);
  });
});
