/**
 * Account quotas: the admission script on real Redis through the Upstash protocol, and 429s through
 * the real Worker.
 */
import { Redis } from "@upstash/redis";
import { beforeAll, describe, expect, it } from "vitest";
import { admit } from "../server-shared/quota.ts";
import { setSettings } from "../ops/accounts.ts";
import { freePort } from "../local/ports.ts";
import { call, newAccount, stack, withDb } from "./support/api.ts";
import { expectError } from "./support/security.ts";

let redis: Redis;

beforeAll(() => {
  redis = new Redis({ url: stack().upstashUrl, token: stack().secrets.upstash, retry: false, enableTelemetry: false });
});

const account = (settings: { requests_per_second?: number | null; tokens_per_second?: number | null }) => ({
  id: crypto.randomUUID(),
  requests_per_second: settings.requests_per_second ?? null,
  tokens_per_second: settings.tokens_per_second ?? null,
});

describe("admission script", () => {
  it("admits exactly the request limit per UTC second, even when admissions race", async () => {
    const acct = account({ requests_per_second: 10 });
    const now = Date.UTC(2026, 10, 22, 12, 0, 0, 100);
    const results = await Promise.all(Array.from({ length: 40 }, () => admit(redis, acct, 0, now)));
    expect(results.filter((r) => r.admitted)).toHaveLength(10);
    const refused = results.find((r) => !r.admitted);
    expect(refused).toMatchObject({ admitted: false, limit: "requests_per_second", value: 10, retryAfterMs: 900 });
    // The next UTC second is a new window.
    expect((await admit(redis, acct, 0, now + 900)).admitted).toBe(true);
  });

  it("reserves worst-case tokens and admits up to the token limit, with no refunds", async () => {
    const acct = account({ tokens_per_second: 1000 });
    const now = Date.UTC(2026, 10, 22, 12, 0, 1, 0);
    expect((await admit(redis, acct, 600, now)).admitted).toBe(true);
    expect(await admit(redis, acct, 600, now)).toMatchObject({ admitted: false, limit: "tokens_per_second", retryAfterMs: 1000 });
    expect((await admit(redis, acct, 400, now)).admitted).toBe(true);
    expect((await admit(redis, acct, 1, now)).admitted).toBe(false);
  });

  it("throttles every time a request whose reservation exceeds the token limit", async () => {
    const acct = account({ tokens_per_second: 100 });
    for (let second = 0; second < 5; second++) {
      const result = await admit(redis, acct, 101, Date.UTC(2026, 10, 22, 12, 1, second));
      expect(result).toMatchObject({ admitted: false, limit: "tokens_per_second" });
    }
  });

  it("checks both limits atomically: a token refusal consumes no request", async () => {
    const acct = account({ requests_per_second: 2, tokens_per_second: 100 });
    const now = Date.UTC(2026, 10, 22, 12, 2, 0);
    expect((await admit(redis, acct, 200, now)).admitted).toBe(false);
    expect((await admit(redis, acct, 200, now)).admitted).toBe(false);
    expect((await admit(redis, acct, 10, now)).admitted).toBe(true);
    expect((await admit(redis, acct, 10, now)).admitted).toBe(true);
    expect(await admit(redis, acct, 10, now)).toMatchObject({ admitted: false, limit: "requests_per_second" });
  });

  it("does not consult Redis for an account without quotas, so an outage cannot touch it", async () => {
    const dead = new Redis({ url: `http://127.0.0.1:${await freePort()}`, token: "x", retry: false, enableTelemetry: false });
    expect(await admit(dead, account({}), 1_000_000)).toEqual({ admitted: true });
  });

  it("refuses an account with a quota when Redis is unreachable, rather than letting it through unmetered", async () => {
    const dead = new Redis({ url: `http://127.0.0.1:${await freePort()}`, token: "x", retry: false, enableTelemetry: false });
    await expect(admit(dead, account({ requests_per_second: 5 }), 0)).rejects.toMatchObject({ code: "quota_unavailable", status: 503 });
  });
});

describe("quotas through the Worker", () => {
  it("answers 429 with Retry-After, retry-after-ms and the envelope once the request limit is reached", async () => {
    const acct = await newAccount();
    await withDb((db) => setSettings(db, acct.accountId, { requests_per_second: 2 }));
    const replies = await Promise.all(Array.from({ length: 8 }, () => call("/v1/models", { token: acct.key.secret })));
    const limited = replies.filter((r) => r.status === 429);
    // Eight requests span at most two UTC seconds, each admitting two.
    expect(replies.filter((r) => r.status === 200).length).toBeLessThanOrEqual(4);
    expect(limited.length).toBeGreaterThanOrEqual(4);
    const one = limited[0]!;
    expectError(one, 429, "rate_limited");
    expect(one.headers.get("retry-after")).toBe("1");
    const waitMs = Number(one.headers.get("retry-after-ms"));
    expect(waitMs).toBeGreaterThan(0);
    expect(waitMs).toBeLessThanOrEqual(1000);
    await new Promise((r) => setTimeout(r, waitMs + 50));
    expect((await call("/v1/models", { token: acct.key.secret })).status).toBe(200);
  });

  it("applies a changed setting to every key of the account on the next request, and none clears it", async () => {
    const acct = await newAccount();
    await withDb((db) => setSettings(db, acct.accountId, { tokens_per_second: 1 }));
    // A models listing reserves no tokens, so a token quota alone does not throttle it.
    expect((await call("/v1/models", { token: acct.key.secret })).status).toBe(200);
    await withDb((db) => setSettings(db, acct.accountId, { requests_per_second: 1, tokens_per_second: null }));
    const burst = await Promise.all([1, 2, 3].map(() => call("/v1/models", { token: acct.key.secret })));
    expect(burst.some((r) => r.status === 429)).toBe(true);
    await withDb((db) => setSettings(db, acct.accountId, { requests_per_second: null }));
    const free = await Promise.all([1, 2, 3, 4, 5].map(() => call("/v1/models", { token: acct.key.secret })));
    expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  });
});
