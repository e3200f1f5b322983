/**
 * The production deployment at the configuration level (Cloudflare cannot be reached from here):
 * wrangler.toml's production environment as wrangler reads it, the settings it gives the edge, the
 * bundle `wrangler deploy --env production` would upload, storage grants pointed at R2's S3
 * endpoint, and one Worker answering the same keys, models and bulk jobs under either host name.
 */
import { request } from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unstable_readConfig } from "wrangler";
import { describe, expect, it } from "vitest";
import { EdgeSettings } from "../edge/settings.ts";
import { signUpload } from "../server-shared/grants.ts";
import { neonRoute } from "../server-shared/neon-route.ts";
import { parseSettings } from "../server-shared/settings.ts";
import { buildEdgeBundle, WORKER_GZIP_LIMIT_BYTES } from "../ops/edge-bundle.ts";
import { newAccount, stack } from "./support/api.ts";
import { lines, submitted } from "./support/bulk.ts";

const production = unstable_readConfig({ config: join(import.meta.dirname, "..", "wrangler.toml"), env: "production" });
const vars = production.vars as Record<string, string>;
const secrets = production.secrets?.required ?? [];
// Secret-looking values a deployer would put in with `wrangler secret put`; only their shape matters here.
const placeholderSecrets = {
  DATABASE_URL: "postgres://app:pw@ep-quiet-lake-123456.us-east-2.aws.neon.tech/svc?sslmode=require",
  UPSTASH_REDIS_REST_TOKEN: "token",
  SIDECAR_SECRET: "sidecar-secret",
  STORAGE_ACCESS_KEY_ID: "0123456789abcdef0123456789abcdef",
  STORAGE_SECRET_ACCESS_KEY: "secret-access-key",
  WEBHOOK_SECRET_KEY: "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=",
};

describe("wrangler.toml's production environment", () => {
  it("serves the service's host and the earlier host name with the one Worker, and binds the R2 bucket", () => {
    expect(production.name).toBe("decision-service");
    expect(production.workers_dev).toBe(false);
    expect(production.routes).toHaveLength(2);
    for (const route of production.routes ?? []) expect(route).toMatchObject({ custom_domain: true });
    expect(production.r2_buckets).toEqual([expect.objectContaining({ binding: "BUCKET" })]);
    // Invocation logs would record request URLs and headers (Authentication 8).
    expect(production.observability?.logs?.invocation_logs).toBe(false);
  });

  it("gives every edge setting as a var or a secret to put, never both, and never the local bridge or a test setting", () => {
    const settings = Object.keys(EdgeSettings.shape).filter((name) => name !== "NEON_LOCAL_BRIDGE" && !name.startsWith("SVC_TEST_"));
    expect([...Object.keys(vars), ...secrets].sort()).toEqual(settings.sort());
    expect(Object.keys(vars).filter((name) => secrets.includes(name))).toEqual([]);
    for (const name of Object.keys(vars)) expect(name).not.toMatch(/SECRET|TOKEN|PASSWORD|DATABASE_URL|KEY_ID/);
    expect(Object.keys(vars)).not.toContain("NEON_LOCAL_BRIDGE");
    expect(Object.keys(vars).filter((name) => name.startsWith("SVC_TEST_"))).toEqual([]);
    // Webhooks go to public HTTPS addresses only in production.
    expect(vars.WEBHOOK_PRIVATE_TARGETS).toBe("off");
  });

  it("makes settings the edge accepts: the database reached at Neon's own endpoints, grants signed for R2's S3 endpoint", async () => {
    const settings = parseSettings("edge", EdgeSettings, { ...vars, ...placeholderSecrets });
    expect(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE)).toEqual({ via: "neon" });
    expect(settings.STORAGE_ENDPOINT).toMatch(/^https:\/\/[0-9a-f]{32}\.r2\.cloudflarestorage\.com\/[a-z0-9-]+$/);
    // The public base URL is the host the Worker serves (grants never follow a request's Host).
    expect((production.routes ?? []).map((route: string | { pattern: string }) => (typeof route === "string" ? route : route.pattern))).toContain(new URL(settings.PUBLIC_URL).host);
    // Grants and the binding must name one bucket: the edge checks an upload through the binding.
    expect(new URL(settings.STORAGE_ENDPOINT!).pathname.slice(1)).toBe(production.r2_buckets[0]!.bucket_name);

    const objectKey = "batches/00000000-0000-4000-8000-000000000000/input.jsonl";
    const upload = await signUpload(
      { endpoint: settings.STORAGE_ENDPOINT!, accessKeyId: settings.STORAGE_ACCESS_KEY_ID, secretAccessKey: settings.STORAGE_SECRET_ACCESS_KEY },
      objectKey,
      48213,
      Date.parse("2026-11-22T12:00:00Z"),
    );
    const url = new URL(upload.url);
    const endpoint = new URL(settings.STORAGE_ENDPOINT!);
    // Path-style (bucket first), the region R2 expects ("auto"), service s3, the length and the no-overwrite header signed.
    expect(url.host).toBe(endpoint.host);
    expect(url.pathname).toBe(`${endpoint.pathname}/${objectKey}`);
    expect(url.searchParams.get("X-Amz-Credential")).toBe(`${placeholderSecrets.STORAGE_ACCESS_KEY_ID}/20261122/auto/s3/aws4_request`);
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;host;if-none-match");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("7200");
    expect(upload.headers).toEqual({ "content-length": "48213", "if-none-match": "*" });
  });

  it("bundles within Cloudflare's limit (wrangler deploy --env production --dry-run)", () => {
    const bundle = buildEdgeBundle("production", mkdtempSync(join(tmpdir(), "svc-edge-bundle-")));
    console.log(`edge bundle (env production): ${(bundle.bytes / 1024).toFixed(1)} KiB, gzip ${(bundle.gzipBytes / 1024).toFixed(1)} KiB`);
    expect(bundle.gzipBytes).toBeGreaterThan(0);
    expect(bundle.gzipBytes).toBeLessThanOrEqual(WORKER_GZIP_LIMIT_BYTES);
    // The bindings wrangler would attach: the bucket and the vars; no secret value is in the file.
    expect(bundle.output).toContain("env.BUCKET (decision-service)");
    expect(bundle.output).not.toContain(placeholderSecrets.SIDECAR_SECRET);
  }, 60_000);
});

/** A request to the local edge as if it came in under `host` (custom domains route by Host). */
function under(host: string, path: string, opts: { method?: string; token: string }): Promise<{ status: number; body: Record<string, unknown> }> {
  const base = new URL(stack().baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, path, method: opts.method ?? "GET", headers: { host, authorization: `Bearer ${opts.token}` } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the earlier host name", () => {
  it("answers the same keys, models and bulk jobs as the service's host", async () => {
    const [current, earlier] = (production.routes ?? []).map((route: string | { pattern: string }) => (typeof route === "string" ? route : route.pattern));
    const account = await newAccount();
    const batchId = await submitted(account, lines([{ custom_id: "a", state: { x: 1 }, questions: { ok: { type: "noul", question: "Is x set?" } } }]));
    const answers = await Promise.all(
      [current!, earlier!].flatMap((host) => [under(host, "/v1/models", { token: account.key.secret }), under(host, `/v1/batches/${batchId}`, { token: account.key.secret })]),
    );
    for (const answer of answers) expect(answer.status).toBe(200);
    expect(answers[2]!.body).toEqual(answers[0]!.body);
    expect(answers[3]!.body).toMatchObject({ id: batchId });
    expect(answers[3]!.body.id).toBe(answers[1]!.body.id);
  });
});
