/** Conventions every edge response keeps: request id, error envelope, one allowed browser origin. */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REQUEST_ID_HEADER } from "../contract/limits.ts";
import { ALLOWED_ORIGIN, scanLogs } from "./support/global-stack.ts";
import { call, newAccount, stack } from "./support/api.ts";
import { expectError } from "./support/security.ts";

describe("request ids", () => {
  it("are on every response, success and error alike, and unique", async () => {
    const account = await newAccount();
    const replies = await Promise.all([
      call("/health"),
      call("/v1/models", { token: account.key.secret }),
      call("/v1/models"),
      call("/v1/keys", { token: account.key.secret }),
      call("/no/such/route"),
      call("/v1/keys", { token: account.userToken, rawBody: "{" }),
    ]);
    const ids = replies.map((r) => r.requestId);
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe("error envelope", () => {
  it("covers unknown routes and unsupported methods", async () => {
    expectError(await call("/v1/unknown"), 404, "not_found");
    // A method the path does not serve is 405 with `Allow` (RFC 9110); under a prefix whose every
    // route needs a key (/v1/batches/*) the key is checked first.
    const deleted = await call("/v1/models", { method: "DELETE" });
    expectError(deleted, 405, "method_not_allowed");
    expect(deleted.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    const account = await newAccount();
    const wrongMethod = await call(`/v1/batches/${crypto.randomUUID()}/submit`, { method: "PUT", token: account.key.secret });
    expectError(wrongMethod, 405, "method_not_allowed");
    expect(wrongMethod.headers.get("allow")).toBe("POST, OPTIONS");
    expectError(await call(`/v1/batches/${crypto.randomUUID()}/unknown`, { method: "PUT", token: account.key.secret }), 404, "not_found");
  });
});

describe("browser origin", () => {
  const preflight = (origin: string) =>
    fetch(`${stack().baseUrl}/v1/models`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
    });

  it("allows the one configured origin, and exposes the request id to it", async () => {
    const res = await preflight(ALLOWED_ORIGIN);
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
    expect(res.headers.get("access-control-allow-headers")).toMatch(/authorization/);
    const account = await newAccount();
    const get = await fetch(`${stack().baseUrl}/v1/models`, { headers: { origin: ALLOWED_ORIGIN, authorization: `Bearer ${account.key.secret}` } });
    expect(get.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
    expect(get.headers.get("access-control-expose-headers")).toContain(REQUEST_ID_HEADER);
  });

  it.each(["https://evil.example.test", `${ALLOWED_ORIGIN}.evil.test`, "http://console.example.test", "null"])(
    "gives no access to any other origin (%s)",
    async (origin) => {
      const res = await preflight(origin);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      const get = await fetch(`${stack().baseUrl}/health`, { headers: { origin } });
      expect(get.headers.get("access-control-allow-origin")).toBeNull();
    },
  );
});

describe("log scan", () => {
  it("finds a secret written to any log file, and accepts clean logs", () => {
    const dir = mkdtempSync(join(tmpdir(), "scan-"));
    try {
      mkdirSync(join(dir, "logs"));
      const ledger = join(dir, "secrets-used.txt");
      writeFileSync(ledger, "svc_secret_one_0123456789\nsecond-secret-abcdefgh\nthird-secret-abcdefghij\n");
      writeFileSync(join(dir, "logs", "edge.log"), "GET /v1/models 200\n");
      expect(scanLogs(dir, ledger)).toEqual([]);
      writeFileSync(join(dir, "logs", "sidecar.log"), "authorization: Bearer second-secret-abcdefgh\n");
      expect(scanLogs(dir, ledger)).toEqual([`${join(dir, "logs", "sidecar.log")} (secret #1)`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
