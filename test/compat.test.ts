/**
 * The official third-party clients, installed from their registries and used unchanged, against the
 * real stack (Worker, sidecar, runtime with the default model): the JavaScript client
 * `@typesafe-ai/sdk` 0.6.0 here, the Python client `typesafe-sdk` 0.7.2 through pytest
 * (test/compat/test_python_client.py). A failure here means the wire contract drifted from what the
 * clients send, parse or retry.
 *
 * Attempts are counted by a `fetch` passed to the client that forwards every call to the real server
 * and notes what it sent and got: nothing on the wire is faked.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import {
  APIError,
  AuthenticationError,
  NotFoundError,
  RateLimitError,
  TypeSafeClient,
  TypeSafeError,
  UnprocessableEntityError,
  choice,
  noul,
  score,
  type Fetch,
} from "@typesafe-ai/sdk";
import { beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { SHARED_ALIAS } from "../contract/limits.ts";
import { setSettings } from "../ops/accounts.ts";
import { newAccount, remember, stack, withDb } from "./support/api.ts";
import { COMPAT_DIR, ensurePythonClient } from "./compat/python-client.ts";

/** One attempt the client made, as the forwarding `fetch` saw it. */
interface Attempt {
  retryCount: string | null;
  sentAt: number;
  answeredAt: number;
  status: number;
  retryAfterMs: number | null;
}

function recordingClient(apiKey: string): { client: TypeSafeClient; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  const fetch: Fetch = async (input, init) => {
    const sentAt = Date.now();
    const response = await globalThis.fetch(input, init);
    const retryAfterMs = response.headers.get("retry-after-ms");
    attempts.push({
      retryCount: new Headers(init?.headers).get("x-typesafe-retry-count"),
      sentAt,
      answeredAt: Date.now(),
      status: response.status,
      retryAfterMs: retryAfterMs === null ? null : Number(retryAfterMs),
    });
    return response;
  };
  return { client: new TypeSafeClient({ apiKey, baseURL: stack().baseUrl, fetch }), attempts };
}

/** The error a client call rejects with (fails the test if it resolves). */
async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("the call succeeded; an error was expected");
}

/** Quota windows are UTC seconds: start two quick calls just after one begins, so they share it. */
async function startOfNextSecond(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
}

/** Timers may fire a millisecond or two early against `Date.now()`. */
const TIMER_SLACK_MS = 5;

const state = { ticket: "The invoice was charged twice this month.", customer: "ACME" };
const tiny = { q: noul("Is this text about money?") };

let plain: Awaited<ReturnType<typeof newAccount>>;
/** Limited to one request per second: of two quick calls, one is refused with 429 and retried. */
let oneRequestPerSecond: Awaited<ReturnType<typeof newAccount>>;
/** A token quota below one decision's reservation: every decision is refused with 429. */
let tooFewTokens: Awaited<ReturnType<typeof newAccount>>;

beforeAll(async () => {
  [plain, oneRequestPerSecond, tooFewTokens] = await Promise.all([newAccount(), newAccount(), newAccount()]);
  await withDb(async (db) => {
    await setSettings(db, oneRequestPerSecond.accountId, { requests_per_second: 1 });
    await setSettings(db, tooFewTokens.accountId, { tokens_per_second: 100 });
  });
});

describe("JavaScript client @typesafe-ai/sdk 0.6.0", () => {
  it("sends noul, choice and score questions and parses typed answers from the release behind the alias", async () => {
    const { client, attempts } = recordingClient(plain.key.secret);
    const { data, requestId } = await client
      .systemOne({
        model: SHARED_ALIAS,
        state,
        questions: {
          urgent: noul("Does the customer report a problem with money?"),
          topic: choice("What is the ticket about?", { billing: "payments and invoices", bug: null, praise: "compliments" }),
          severity: score("How severe is it?", ["none", { label: "some", examples: ["slow page"] }, "severe"]),
        },
      })
      .withResponse();

    expect(data.model).toBe(stack().releaseId);
    expect(requestId).toMatch(/^req_/);
    expect(attempts.map((a) => a.status)).toEqual([200]);

    const { urgent, topic, severity } = data.answers;
    expectTypeOf(urgent.noul).toEqualTypeOf<number>();
    expectTypeOf(topic.choice).toEqualTypeOf<"billing" | "bug" | "praise">();
    expectTypeOf(severity.probabilities).toHaveProperty("2");
    // option_mass is this service's addition; the official client passes it through untouched.
    expect(urgent).toEqual({ type: "noul", noul: expect.any(Number), option_mass: expect.any(Number) });
    expect(urgent.noul).toBeGreaterThanOrEqual(0);
    expect(urgent.noul).toBeLessThanOrEqual(1);

    expect(topic.type).toBe("choice");
    expect(["billing", "bug", "praise"]).toContain(topic.choice);
    expect(Object.keys(topic.probabilities)).toEqual(["billing", "bug", "praise"]);
    expect(topic.probabilities[topic.choice]).toBe(Math.max(...Object.values(topic.probabilities)));
    expect(topic.confidence).toBeGreaterThanOrEqual(0);
    expect(topic.confidence).toBeLessThanOrEqual(1);

    expect(severity.type).toBe("score");
    expect(severity.legend).toEqual({ "0": "none", "1": { label: "some", examples: ["slow page"] }, "2": "severe" });
    expect(Object.keys(severity.probabilities)).toEqual(["0", "1", "2"]);
    expect(severity.score).toBeGreaterThanOrEqual(0);
    expect(severity.score).toBeLessThanOrEqual(2);
    expect(Number.isInteger(data.usage.input_tokens) && Number.isInteger(data.usage.output_tokens)).toBe(true);
  });

  it("round-trips question ids and options that plain objects treat specially: __proto__ and integer-like", async () => {
    // As a JS program would hold them: JSON.parse makes "__proto__" an own key; integer-like keys come first.
    const questions = JSON.parse('{"b":{"type":"noul","instructions":"Money?"},"2":{"type":"noul"},"__proto__":{"type":"choice","criteria":{"__proto__":null,"10":"ten","x":null,"2":"two"}},"1":{"type":"noul"}}');
    const { client } = recordingClient(plain.key.secret);
    const { data, response } = await client.systemOne({ model: SHARED_ALIAS, state, questions }).withResponse();
    // The client sent the keys in its object's order; the body answers in exactly that order.
    const sent = Object.keys(questions);
    expect(sent).toEqual(["1", "2", "b", "__proto__"]);
    expect(Object.keys(data.answers)).toEqual(sent);
    const special = Object.getOwnPropertyDescriptor(data.answers, "__proto__")?.value as { type: string; probabilities: Record<string, number> };
    expect(special.type).toBe("choice");
    expect(Object.keys(special.probabilities)).toEqual(Object.keys(questions["__proto__"].criteria));
    expect(Object.getPrototypeOf(data.answers)).toBe(Object.prototype);
    expect(response.headers.get("content-type")).toMatch(/application\/json/);
  });

  it("lists the models: the release behind the shared alias, with the alias", async () => {
    const { client } = recordingClient(plain.key.secret);
    const { data: models, requestId } = await client.models.list().withResponse();
    expect(requestId).toMatch(/^req_/);
    // `aliases` is this service's extra field: the client passes it through untyped.
    const shared = models.find((m) => m.name === stack().releaseId) as (typeof models)[number] & { aliases?: unknown };
    expect(shared).toMatchObject({ description: expect.any(String), release_date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/) });
    expect(shared.aliases).toContain(SHARED_ALIAS);
  });

  describe("errors surface as the client's classes, with the request id and the server's message", () => {
    it("401 for a wrong key: AuthenticationError, not retried", async () => {
      const { client, attempts } = recordingClient(remember(`svc_${"a".repeat(26)}_${"b".repeat(43)}`));
      const err = await rejection(client.systemOne({ model: SHARED_ALIAS, state, questions: tiny }));
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err).toMatchObject({ status: 401, requestId: expect.stringMatching(/^req_/), body: { error: { code: "invalid_credentials" } } });
      expect((err as APIError).message).toMatch(/^401 \S/);
      expect(attempts).toHaveLength(1);
    });

    it("404 for an unknown model: NotFoundError, not retried", async () => {
      const { client, attempts } = recordingClient(plain.key.secret);
      const err = await rejection(client.systemOne({ model: "no-such-model", state, questions: tiny }));
      expect(err).toBeInstanceOf(NotFoundError);
      expect(err).toMatchObject({ status: 404, requestId: expect.stringMatching(/^req_/), body: { error: { code: "model_not_found" } } });
      expect(attempts).toHaveLength(1);
    });

    it("the client's own checks stop a one-level score before it is sent", async () => {
      const { client, attempts } = recordingClient(plain.key.secret);
      // The client types forbid a one-level score; the cast sends what a JavaScript caller could.
      const questions = { s: { type: "score", criteria: ["only"] } } as unknown as typeof tiny;
      expect(() => client.systemOne({ model: SHARED_ALIAS, state, questions })).toThrow(TypeSafeError);
      expect(attempts).toHaveLength(0);
    });

    it.each([
      ["a choice with one option", { c: choice("Which?", { only: null }) }, /questions\.c\.criteria: a choice needs at least 2 options/],
      ["a score level that is null", { s: score("How much?", ["low", null]) }, /questions\.s\.criteria\.1/],
    ])("422 for %s, which the client lets through: UnprocessableEntityError naming the field", async (_, questions, message) => {
      const { client, attempts } = recordingClient(plain.key.secret);
      const err = await rejection(client.systemOne({ model: SHARED_ALIAS, state, questions }));
      expect(err).toBeInstanceOf(UnprocessableEntityError);
      expect(err).toMatchObject({ status: 422, requestId: expect.stringMatching(/^req_/) });
      expect((err as APIError).message).toMatch(message);
      expect(attempts).toHaveLength(1);
    });
  });

  describe("429 is retried after the server's delay", () => {
    it("of two quick calls under one request per second, one waits retry-after-ms and then succeeds", async () => {
      const { client, attempts } = recordingClient(oneRequestPerSecond.key.secret);
      await startOfNextSecond();
      const results = await Promise.all([1, 2].map(() => client.systemOne({ model: SHARED_ALIAS, state, questions: tiny })));
      expect(results.map((r) => r.model)).toEqual([stack().releaseId, stack().releaseId]);

      expect(attempts.map((a) => [a.retryCount, a.status]).sort()).toEqual([["1", 200], [null, 200], [null, 429]].sort());
      const refused = attempts.find((a) => a.status === 429)!;
      const retried = attempts.find((a) => a.retryCount === "1")!;
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(retried.sentAt).toBeGreaterThanOrEqual(refused.answeredAt + refused.retryAfterMs! - TIMER_SLACK_MS);
    });

    it("a token quota that always refuses: two retries, each after retry-after-ms, then RateLimitError", async () => {
      const { client, attempts } = recordingClient(tooFewTokens.key.secret);
      const err = await rejection(client.systemOne({ model: SHARED_ALIAS, state, questions: tiny }));
      expect(err).toBeInstanceOf(RateLimitError);
      expect(err).toMatchObject({ status: 429, requestId: expect.stringMatching(/^req_/), retryAfterMs: expect.any(Number) });
      expect(attempts.map((a) => [a.retryCount, a.status])).toEqual([[null, 429], ["1", 429], ["2", 429]]);
      for (let i = 1; i < attempts.length; i++) {
        const [before, after] = [attempts[i - 1]!, attempts[i]!];
        expect(after.sentAt).toBeGreaterThanOrEqual(before.answeredAt + before.retryAfterMs! - TIMER_SLACK_MS);
      }
    });
  });
});

describe("Python client typesafe-sdk 0.7.2", () => {
  let pythonPath: string;
  beforeAll(async () => {
    pythonPath = await ensurePythonClient();
  });

  it("passes test/compat/test_python_client.py against the same stack", async () => {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PYTHONPATH: pythonPath,
      PYTHONDONTWRITEBYTECODE: "1",
      PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1",
      COMPAT_BASE_URL: stack().baseUrl,
      COMPAT_RELEASE_ID: stack().releaseId,
      COMPAT_API_KEY: plain.key.secret,
      COMPAT_WRONG_KEY: remember(`svc_${"c".repeat(26)}_${"d".repeat(43)}`),
      COMPAT_RPS_KEY: oneRequestPerSecond.key.secret,
      COMPAT_TOKENS_KEY: tooFewTokens.key.secret,
    };
    const args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", COMPAT_DIR, join(COMPAT_DIR, "test_python_client.py")];
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const child = spawn("python3", args, { env, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (chunk) => (output += chunk));
      child.stderr.on("data", (chunk) => (output += chunk));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, output }));
    });
    expect(code, output).toBe(0);
  });
});
