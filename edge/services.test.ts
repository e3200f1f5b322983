import { neonConfig } from "@neondatabase/serverless";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "./env.ts";
import type { Context } from "hono";
import { signUpload } from "../server-shared/grants.ts";
import type { AppEnv } from "./env.ts";
import { services } from "./services.ts";
import { storageGrants } from "./storage.ts";

const NEON_URL = "postgres://app:pw@ep-quiet-lake-123456.us-east-2.aws.neon.tech/svc?sslmode=require";
const settings = {
  DATABASE_URL: NEON_URL,
  UPSTASH_REDIS_REST_URL: "https://eu1-example.upstash.io",
  UPSTASH_REDIS_REST_TOKEN: "t",
  SIDECAR_SECRET: "s",
  OIDC_ISSUER: "https://login.example.com/",
  OIDC_AUDIENCE: "svc-api",
  OIDC_JWKS_URL: "https://login.example.com/jwks",
  STORAGE_ACCESS_KEY_ID: "k",
  STORAGE_SECRET_ACCESS_KEY: "s",
  WEBHOOK_SECRET_KEY: "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=",
  PUBLIC_URL: "https://decide.example.com",
};
const env = (extra: Record<string, unknown> = {}) => ({ BUCKET: {} as R2Bucket, ...settings, ...extra }) as Env;

function refusalOf(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new Error("expected a refusal");
}

afterEach(() => vi.unstubAllGlobals());

describe("edge services", () => {
  it("are built once per isolate's env: the same clients for every request", () => {
    const shared = env();
    const first = services(shared);
    expect(services(shared)).toBe(first);
    expect(first.settings.ALLOWED_ORIGIN).toBeUndefined();
  });

  it("answer 503 for a misconfigured edge, with an operator note naming the setting", () => {
    const refused = refusalOf(() => services(env({ SIDECAR_SECRET: undefined })));
    expect(refused).toMatchObject({ status: 503, code: "unavailable", operatorNote: expect.stringContaining("setting SIDECAR_SECRET is required") });
    expect((refused as Error).message).not.toContain("SIDECAR_SECRET");
  });

  // Neon's endpoints cannot be reached from here, so the network is a fake that records where the
  // driver sent the query; what is checked is the driver's configuration as the edge left it.
  it("send a remote DATABASE_URL's queries to Neon's own HTTPS endpoint, never to a local bridge", async () => {
    // A local edge built first in the same process must not leave its bridge behind.
    services(env({ DATABASE_URL: "postgres://u:p@127.0.0.1:5432/svc", NEON_LOCAL_BRIDGE: "127.0.0.1:6543" }));
    expect(neonConfig.fetchEndpoint).toBe("http://127.0.0.1:6543/sql");

    const sent: Array<{ url: string; connection: string | null }> = [];
    vi.stubGlobal("fetch", async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push({ url: String(input), connection: new Headers(init?.headers).get("neon-connection-string") });
      return new Response(JSON.stringify({ message: "the fake network answers nothing" }), { status: 400 });
    });
    const { sql } = services(env());
    await expect(sql`SELECT 1`).rejects.toThrow();
    expect(sent).toEqual([{ url: "https://api.us-east-2.aws.neon.tech/sql", connection: expect.stringContaining("@ep-quiet-lake-123456.us-east-2.aws.neon.tech/svc?sslmode=require") }]);
    expect(neonConfig.useSecureWebSocket).toBe(true);
    expect(String(neonConfig.wsProxy)).not.toContain("127.0.0.1");
  });

  it("refuse a local bridge named for a remote database (503, the setting named), and a loopback database without one", () => {
    const remote = refusalOf(() => services(env({ NEON_LOCAL_BRIDGE: "127.0.0.1:6543" })));
    expect(remote).toMatchObject({ status: 503, operatorNote: expect.stringContaining("setting NEON_LOCAL_BRIDGE must be unset for a remote DATABASE_URL") });
    const local = refusalOf(() => services(env({ DATABASE_URL: "postgres://u:p@localhost/svc" })));
    expect(local).toMatchObject({ status: 503, operatorNote: expect.stringContaining("setting NEON_LOCAL_BRIDGE is required for a loopback DATABASE_URL") });
  });
});

describe("storage grants", () => {
  it("point at STORAGE_ENDPOINT, except an upload of no declared size, which only the edge's /storage bounds", async () => {
    const endpoint = "https://0123456789abcdef0123456789abcdef.r2.cloudflarestorage.com/svc-data";
    const c = { env: env({ STORAGE_ENDPOINT: endpoint }) } as Context<AppEnv>;
    expect(storageGrants(c, "clients").endpoint).toBe(endpoint);
    expect(storageGrants(c, "clients", { edgeOnly: true }).endpoint).toBe(`${settings.PUBLIC_URL}/storage`);
    const unbounded = await signUpload(storageGrants(c, "clients", { edgeOnly: true }), "batches/x/input.jsonl", null);
    expect(unbounded.url.startsWith(`${settings.PUBLIC_URL}/storage/batches/x/input.jsonl?`)).toBe(true);
    expect(unbounded.headers).toEqual({ "if-none-match": "*" });
    const bounded = await signUpload(storageGrants(c, "clients"), "batches/x/input.jsonl", 10);
    expect(bounded.url.startsWith(`${endpoint}/batches/x/input.jsonl?`)).toBe(true);
    expect(new URL(bounded.url).searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;host;if-none-match");
  });
});
