import { describe, expect, it } from "vitest";
import type { Env } from "./env.ts";
import { services } from "./services.ts";

const settings = {
  DATABASE_URL: "postgres://u:p@127.0.0.1:5432/db",
  UPSTASH_REDIS_REST_URL: "http://127.0.0.1:8079",
  UPSTASH_REDIS_REST_TOKEN: "t",
  SIDECAR_SECRET: "s",
  OIDC_ISSUER: "http://127.0.0.1:8788",
  OIDC_AUDIENCE: "svc-api",
  OIDC_JWKS_URL: "http://127.0.0.1:8788/jwks",
  STORAGE_ACCESS_KEY_ID: "k",
  STORAGE_SECRET_ACCESS_KEY: "s",
};
const env = (extra: Record<string, unknown> = {}) => ({ BUCKET: {} as R2Bucket, ...settings, ...extra }) as Env;

describe("edge services", () => {
  it("are built once per isolate's env: the same clients for every request", () => {
    const shared = env();
    const first = services(shared);
    expect(services(shared)).toBe(first);
    expect(first.settings.ALLOWED_ORIGIN).toBeUndefined();
  });

  it("answer 503 for a misconfigured edge, with an operator note naming the setting", () => {
    let refused: unknown;
    try {
      services(env({ SIDECAR_SECRET: undefined }));
    } catch (err) {
      refused = err;
    }
    expect(refused).toMatchObject({ status: 503, code: "unavailable", operatorNote: expect.stringContaining("setting SIDECAR_SECRET is required") });
    expect((refused as Error).message).not.toContain("SIDECAR_SECRET");
  });
});
