/**
 * GET /v1/usage on the real stack, compared with the decisions actually made: real-time decisions by
 * two keys of one account and a batch's records, counted per key and per UTC day, with the tokens
 * their answers reported; the range and grouping rules; another account's usage never shows.
 * (Image decisions and the credit they spend are compared in image-models.test.ts, which has a trained image model.)
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { DecisionResponse } from "../contract/decision.ts";
import { ResultsPage } from "../contract/batches.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { Usage, USAGE_DAY_RANGE, USAGE_DAYS, USAGE_RATE, type UsageCounts } from "../contract/usage.ts";
import { USAGE_ENTRIES } from "../server-shared/usage.ts";
import { call, createKey, newAccount, signIn, withDb } from "./support/api.ts";
import { lines, poll, submitted } from "./support/bulk.ts";
import { expectError } from "./support/security.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

const today = () => new Date().toISOString().slice(0, 10);
const QUESTION = { type: "noul", instructions: "Is the customer asking for money back?" };

let account: Account;
let second: { id: string; secret: string; name: string };
/** What the decisions made answered, per key. */
const made = new Map<string, { requests: number; input: number; billable: number; output: number }>();

async function decide(key: { id: string; secret: string }, state: string): Promise<void> {
  const reply = await call<DecisionResponse>("/v1/systemone", { token: key.secret, body: { state, questions: { q: QUESTION } } });
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  const { usage } = reply.body;
  const sum = made.get(key.id) ?? { requests: 0, input: 0, billable: 0, output: 0 };
  made.set(key.id, { requests: sum.requests + 1, input: sum.input + usage.input_tokens, billable: sum.billable + (usage.billable_input_tokens ?? 0), output: sum.output + usage.output_tokens });
}

/** The usage, read as a client should: after a 429, again once its Retry-After has passed. */
async function usage(query: string, token = account.userToken): Promise<Usage> {
  for (;;) {
    const reply = await call(`/v1/usage${query}`, { token });
    if (reply.status === 429) {
      await new Promise((resolve) => setTimeout(resolve, Number(reply.headers.get("retry-after-ms"))));
      continue;
    }
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    return Usage.parse(reply.body);
  }
}

/** Polls until `check` holds of the usage (the sidecar records usage just after answering). */
async function usageUntil(query: string, check: (u: Usage) => boolean): Promise<Usage> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const now = await usage(query);
    if (check(now) || Date.now() > deadline) return now;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  account = await newAccount();
  second = await createKey(account.userToken, "second key");
  for (let i = 0; i < 3; i++) await decide(account.key, `Ticket ${i}: I was charged twice, please refund one.`);
  await decide(second, "Ticket 9: the app crashes when I open it.");
  const batch = await submitted(account, lines([{ custom_id: "a", body: { state: "Refund me", questions: { q: QUESTION } } }, { custom_id: "b", body: { state: "Thanks!", questions: { q: QUESTION } } }]));
  expect((await poll(account, batch)).status).toBe("completed");
  // The batch's records count for the key that submitted it (here also its creator; test/keys.test.ts
  // has one key submit another's batch): what their answers reported.
  const page = ResultsPage.parse((await call(`/v1/batches/${batch}/results`, { token: account.key.secret })).body);
  const sum = made.get(account.key.id)!;
  for (const record of page.data) {
    if (!("response" in record) || !record.response) throw new Error(`record ${record.custom_id} failed`);
    const { usage } = record.response;
    sum.input += usage.input_tokens;
    sum.billable += usage.billable_input_tokens ?? 0;
    sum.output += usage.output_tokens;
  }
}, 120_000);

describe("GET /v1/usage", () => {
  it("counts each key's decisions and tokens as their answers reported them, and a batch's records for the key that submitted it", async () => {
    const byKey = await usageUntil("?group_by=key", (u) => u.totals.requests === 4 && u.totals.batch_records === 2);
    expect(byKey).toMatchObject({ object: "usage", group_by: ["key"], end: today() });
    const first = byKey.data.find((b) => b.key_id === account.key.id)!;
    const other = byKey.data.find((b) => b.key_id === second.id)!;
    expect(byKey.data).toHaveLength(2);
    const mine = made.get(account.key.id)!;
    const theirs = made.get(second.id)!;
    expect(first).toMatchObject({ key_name: "test key", day: null, requests: 3, batch_records: 2, input_tokens: mine.input, billable_input_tokens: mine.billable, output_tokens: mine.output });
    expect(other).toMatchObject({ key_name: "second key", requests: 1, batch_records: 0, input_tokens: theirs.input, billable_input_tokens: theirs.billable, output_tokens: theirs.output, image_credit_micro_usd: 0 });
    expect(first.billable_unreported).toBe(0);
    const sum = (name: keyof UsageCounts) => byKey.data.reduce((total, bucket) => total + bucket[name], 0);
    for (const name of ["requests", "batch_records", "input_tokens", "billable_input_tokens", "output_tokens"] as const) expect(byKey.totals[name]).toBe(sum(name));
  });

  it("gives every day of the range by day, today's holding it all, and the same totals per day and key", async () => {
    const byDay = await usage("");
    expect(byDay.group_by).toEqual(["day"]);
    expect(byDay.data).toHaveLength(USAGE_DAYS);
    expect(byDay.data.map((b) => b.day)).toEqual([...byDay.data.map((b) => b.day!)].sort());
    expect(byDay.data.at(-1)).toMatchObject({ day: today(), requests: 4, batch_records: 2 });
    expect(byDay.data.slice(0, -1).every((b) => b.requests === 0 && b.input_tokens === 0)).toBe(true);
    const both = await usage(`?group_by=day,key&start=${today()}&end=${today()}`);
    expect(both.group_by).toEqual(["day", "key"]);
    // Within a day, by key name: "second key" before "test key".
    expect(both.data.map((b) => [b.day, b.key_id, b.requests])).toEqual([
      [today(), second.id, 1],
      [today(), account.key.id, 3],
    ]);
    expect(both.totals).toEqual(byDay.totals);
    // A range before today: nothing.
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    expect((await usage(`?start=${yesterday}&end=${yesterday}`)).totals.requests).toBe(0);
  });

  it("shows another account only its own usage, and a user without an account none", async () => {
    const stranger = await newAccount();
    expect((await usage("?group_by=key", stranger.userToken)).data).toEqual([]);
    const { token } = await signIn();
    expect((await usage("", token)).totals).toMatchObject({ requests: 0, batch_records: 0 });
  });

  it("refuses a bad range or grouping with 422 naming it, and an API key with 401", async () => {
    for (const [query, message] of [
      ["?start=2026-02-30", /start: a day is YYYY-MM-DD, a calendar day/],
      ["?end=yesterday", /end: a day is YYYY-MM-DD/],
      ["?group_by=month", /group_by is day, key, or both/],
      ["?group_by=day,day", /group_by is day, key, or both/],
      [`?start=${today()}&end=2000-01-01`, /start \(.*\) is after end/],
      [`?start=2000-01-01&end=${today()}`, new RegExp(`at most ${USAGE_DAYS} days at a time`)],
      // Days it cannot count to the end of (it answered 500).
      ["?start=9999-12-02&end=9999-12-31", /end: a day is from 1970-01-01 to 9999-12-30/],
      [`?start=0000-01-01&end=${today()}`, /start: a day is from 1970-01-01 to 9999-12-30/],
    ] as const) {
      const reply = await call(`/v1/usage${query}`, { token: account.userToken });
      expectError(reply, 422, "invalid_request");
      expect(ErrorEnvelope.parse(reply.body).error.message, query).toMatch(message);
    }
    expectError(await call("/v1/usage", { token: account.key.secret }), 401, "wrong_credential_kind");
    expect((await usage(`?start=9999-12-02&end=${USAGE_DAY_RANGE.last}`)).totals.requests).toBe(0);
  });

  it(`answers an account at most ${USAGE_RATE.requests} times in ${USAGE_RATE.windowMs / 1000} s (429 rate_limited with Retry-After), other accounts unaffected`, async () => {
    const busy = await newAccount();
    const replies = await Promise.all(Array.from({ length: USAGE_RATE.requests + 5 }, () => call("/v1/usage", { token: busy.userToken })));
    const refused = replies.filter((r) => r.status === 429);
    // The window may turn during the burst: at most twice the rate gets through.
    expect(refused.length).toBeGreaterThan(0);
    expect(replies.every((r) => r.status === 200 || r.status === 429)).toBe(true);
    expectError(refused[0]!, 429, "rate_limited");
    expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await call("/v1/usage", { token: (await newAccount()).userToken })).status).toBe(200);
  });

  it("reads every row through the account's indexes, with no scan of the batches (its plan, sequential scans off)", async () => {
    const plan = await withDb(async (db) => {
      await db.query("BEGIN");
      await db.query("SET LOCAL enable_seqscan = off");
      const { rows } = await db.query(`EXPLAIN (FORMAT JSON) ${USAGE_ENTRIES}`, [account.accountId, `${today()}T00:00:00Z`, new Date(Date.now() + 86_400_000).toISOString()]);
      await db.query("ROLLBACK");
      return JSON.stringify(rows[0]["QUERY PLAN"]);
    });
    expect(plan).not.toContain('"Seq Scan"');
    expect(plan).not.toContain('"batches"');
    expect(plan).toContain('"usage_records_by_account"');
    expect(plan).toContain('"credit_reservations_settled"');
  });
});
