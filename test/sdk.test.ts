/**
 * The TypeScript SDK (clients/sdk-ts) against the real stack: every resource (image assets with
 * photos written at test time; image decisions as far as an account without a trained image model
 * goes; API keys limited in time, scope and models, used and refused; webhook endpoints, and a real
 * delivery to a loopback receiver checked with `webhooks.verify`), every error class the stack can produce on demand, retries, the connection cap, the URL
 * policy, where settings come from, and the packed tarball installed and run by plain Node without
 * Bun. Answers the real stack cannot give on demand (529, 503, 504, a hang, a
 * dropped connection, a redirect) come from the named fakes of test/support/fake-service.ts.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  choice,
  Client,
  ConfigurationError,
  ConflictError,
  GatewayTimeoutError,
  GoneError,
  IMAGE_REFUSALS,
  IMAGE_BASE_ALIAS,
  ImageRefusedError,
  InputError,
  KEY_SCOPES,
  LIMITS,
  METADATA_LIMITS,
  noul,
  NotFoundError,
  OverloadedError,
  PayloadTooLargeError,
  PaymentRequiredError,
  PermissionDeniedError,
  RateLimitError,
  score,
  ServiceUnavailableError,
  SHARED_ALIAS,
  UnprocessableEntityError,
  VERSION,
  type BatchStatus,
  type ChoiceAnswer,
  type ClientOptions,
  type CreatedKey,
  type CreditBalance,
  type ImageAsset,
  type ImageModel,
  type ImageRefusal,
  type InputRecord,
  type KeyList,
  type KeyMetadata,
  type KeyScope,
  type ListBatchesParams,
  type ListLabelIssuesParams,
  type ListTrainingsParams,
  type TrainingStatus,
  type UsageBucket,
  type UsageCounts,
  type UsageGroup,
  type UsageReport,
  type WithRequestId,
  USAGE_DAYS,
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  WebhookVerificationError,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEndpointWithSecret,
  type WebhookEvent,
} from "../clients/sdk-ts/src/index.ts";
import { requireCredentials, resolveSettings, SettingsError, writeSaved } from "../clients/sdk-ts/src/settings.ts";
import { API_KEY_PATTERN } from "../contract/keys.ts";
import { WebhookVerificationError as ContractVerificationError } from "../contract/webhook-signature.ts";
import { WEBHOOK_SECRET_PATTERN } from "../contract/webhooks.ts";
import { stringifyJson } from "../contract/json.ts";
import type { Training } from "../contract/trainings.ts";
import { setSettings } from "../ops/accounts.ts";
import { call, newAccount, remember, stack, withDb } from "./support/api.ts";
import { animalSentences, noulFile } from "./support/training.ts";
import {
  fakeServiceAnswering,
  fakeServiceCountingConnections,
  fakeServiceDroppingConnections,
  fakeServiceHanging,
  fakeServiceRedirecting,
  type Fake,
} from "./support/fake-service.ts";
import { photo, sha256 } from "./support/images.ts";
import { plainNodeEnv, run } from "./support/plain-node.ts";
import { finishDirectly, recordingFetch, rejection, SETTINGS, withEnv, type Sent } from "./support/sdk.ts";
import { startReceiver, type Received, type Receiver } from "./support/webhook-receiver.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

const SDK_DIR = join(import.meta.dirname, "..", "clients", "sdk-ts");
const UNKNOWN_BATCH = "00000000-0000-4000-8000-000000000000";

/** A client of the real stack. */
const stackClient = (apiKey: string, options: ClientOptions = {}) => new Client({ apiKey, baseURL: stack().baseUrl, ...options });

/** A client of a fake. */
const fakeClient = (fake: Fake, options: ClientOptions = {}) => new Client({ apiKey: "svc_test-key-for-a-fake", baseURL: fake.url, ...options });

const noulRecord = (id: string, extra: object = {}): InputRecord => ({
  custom_id: id,
  body: { state: `ticket ${id}: I was charged twice`, questions: { money: noul("Is it about money?") }, ...extra },
});

/** Records as the bytes of a JSONL file, sent as they are: what a batch is created for, by size. */
const jsonl = (...records: InputRecord[]): Uint8Array => new TextEncoder().encode(records.map((r) => JSON.stringify(r)).join("\n") + "\n");

let account: Account;
let client: Client;
const fakes: Fake[] = [];
const started = async <T extends Fake>(fake: Promise<T>): Promise<T> => {
  const ready = await fake;
  fakes.push(ready);
  return ready;
};

beforeAll(async () => {
  for (const name of SETTINGS) delete process.env[name];
  account = await newAccount();
  client = stackClient(account.key.secret);
});

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()));
});

describe("settings", () => {
  it("come from the option, else the environment variable, else the default", async () => {
    await withEnv({ SVC_API_KEY: "svc_from-env", SVC_BASE_URL: "http://127.0.0.1:9/", SVC_DEFAULT_MODEL: "env-model" }, () => {
      const fromEnv = new Client();
      expect(fromEnv).toMatchObject({ baseURL: "http://127.0.0.1:9", defaultModel: "env-model" });
      const explicit = new Client({ baseURL: "https://decisions.example.test/gateway/", defaultModel: "option-model", timeout: 5000, maxRetries: 0 });
      expect(explicit).toMatchObject({ baseURL: "https://decisions.example.test/gateway", defaultModel: "option-model", timeout: 5000, maxRetries: 0 });
    });
    await withEnv({}, () => {
      expect(new Client({ apiKey: "svc_x", baseURL: stack().baseUrl })).toMatchObject({ defaultModel: SHARED_ALIAS, timeout: 60_000, maxRetries: 2 });
    });
    expect(SHARED_ALIAS).toBe("svc-shared");
    expect(LIMITS.toolRequestTimeoutMs).toBe(60_000);
  });

  it("use an explicit API key over SVC_API_KEY, and SVC_API_KEY when none is given", async () => {
    const wrong = "svc_0000000000000000.not-a-real-secret-of-this-account";
    await withEnv({ SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl }, async () => {
      expect((await new Client().models.list()).models.length).toBeGreaterThan(0);
      expect(await rejection(new Client({ apiKey: wrong }).models.list())).toBeInstanceOf(AuthenticationError);
    });
    await withEnv({ SVC_API_KEY: wrong, SVC_BASE_URL: stack().baseUrl }, async () => {
      expect(await rejection(new Client().models.list())).toBeInstanceOf(AuthenticationError);
      expect((await new Client({ apiKey: account.key.secret }).models.list()).models.length).toBeGreaterThan(0);
    });
  });

  it("must name a key and a base URL, and never come from the command-line tool's saved credentials", async () => {
    const home = mkdtempSync(join(tmpdir(), "sdk-home-"));
    try {
      mkdirSync(join(home, ".svc"), { mode: 0o700 });
      const saved = join(home, ".svc", "config.json");
      writeFileSync(saved, JSON.stringify({ api_key: account.key.secret, apiKey: account.key.secret, base_url: stack().baseUrl, baseURL: stack().baseUrl }), { mode: 0o600 });
      await withEnv({ HOME: home, SVC_CONFIG_PATH: saved }, () => {
        expect(() => new Client()).toThrow(ConfigurationError);
        expect(() => new Client()).toThrow(/no API key: pass \{ apiKey \} .* or set SVC_API_KEY/);
        expect(() => new Client({ apiKey: account.key.secret })).toThrow(/no base URL: .*SVC_BASE_URL.*no default address/);
        expect(() => new Client({ apiKey: "", baseURL: stack().baseUrl })).toThrow(/no API key/);
      });
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("of the svc tools are read only through the settings module, with their precedence", async () => {
    const home = mkdtempSync(join(tmpdir(), "sdk-home-"));
    try {
      const saved = join(home, "svc.json");
      writeSaved(saved, { base_url: `${stack().baseUrl}/`, api_key: account.key.secret });
      const settings = resolveSettings({ SVC_CONFIG_PATH: saved });
      expect(settings).toMatchObject({ apiKey: account.key.secret, baseUrl: stack().baseUrl, defaultModel: SHARED_ALIAS, source: "saved" });
      const { apiKey, baseUrl } = requireCredentials(settings);
      expect((await new Client({ apiKey, baseURL: baseUrl }).models.list()).models.length).toBeGreaterThan(0);
      // An environment key is never sent to the address saved for another key.
      expect(() => requireCredentials(resolveSettings({ SVC_CONFIG_PATH: saved, SVC_API_KEY: "svc_x" }))).toThrow(SettingsError);
      expect(() => resolveSettings({ SVC_CONFIG_PATH: saved, SVC_BASE_URL: "http://decisions.example.test" })).toThrow(ConfigurationError);
      expect(new SettingsError("x")).toBeInstanceOf(ConfigurationError);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("refuse to run in a browser", () => {
    const scope = globalThis as { window?: unknown; document?: unknown };
    scope.window = {};
    scope.document = {};
    try {
      expect(() => stackClient(account.key.secret)).toThrow(ConfigurationError);
      expect(() => stackClient(account.key.secret)).toThrow(/does not run in a browser/);
    } finally {
      delete scope.window;
      delete scope.document;
    }
    expect(() => stackClient(account.key.secret)).not.toThrow();
  });

  it("accept https anywhere and plain http only to a loopback host", () => {
    const base = (baseURL: string) => () => new Client({ apiKey: "svc_x", baseURL });
    for (const good of ["https://decisions.example.test", "http://127.0.0.1:8787", "http://127.9.9.9", "http://localhost:1", "http://[::1]:8787/"]) {
      expect(base(good), good).not.toThrow();
    }
    for (const bad of ["http://decisions.example.test", "http://10.0.0.1:8787", "http://127.0.0.1.example.test", "ftp://decisions.example.test", "not a url"]) {
      expect(base(bad), bad).toThrow(ConfigurationError);
    }
    expect(base("http://decisions.example.test")).toThrow(/plaintext http:\/\/ to a remote host \(decisions.example.test\); use https:\/\//);
    expect(base("https://decisions.example.test/v1/systemone")).toThrow(/without \/v1\/\.\.\.: use https:\/\/decisions.example.test$/);
    expect(base("https://user:pass@decisions.example.test")).toThrow(/credentials/);
    expect(base("https://decisions.example.test/?key=1")).toThrow(/query/);
  });

  it("refuse a timeout or a retry count that cannot work", () => {
    expect(() => stackClient("svc_x", { timeout: 0 })).toThrow(/timeout/);
    expect(() => stackClient("svc_x", { timeout: Number.NaN })).toThrow(/timeout/);
    expect(() => stackClient("svc_x", { maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => stackClient("svc_x", { maxRetries: 1.5 })).toThrow(/maxRetries/);
  });

  it("keep the API key out of the client's printed and serialized forms", () => {
    // Compared as booleans, so that a failure does not print the key.
    expect(inspect(client, { depth: 10, showHidden: true }).includes(account.key.secret)).toBe(false);
    expect(JSON.stringify(client).includes(account.key.secret)).toBe(false);
  });
});

describe("client.models.list", () => {
  it("lists the models the account may use, with the shared alias, and the request id", async () => {
    const list = await client.models.list();
    const shared = list.models.find((m) => m.aliases.includes(SHARED_ALIAS));
    expect(shared).toMatchObject({ name: stack().releaseId });
    expect(list._request_id).toMatch(/^req_/);
    // The request id is not part of the data.
    expect(Object.keys(list)).toEqual(["models"]);
  });
});

describe("client.systemOne", () => {
  it("answers each question with the answer of its type, as plain typed objects", async () => {
    const reply = await client.systemOne({
      state: { ticket: "The invoice was charged twice this month.", customer: "ACME" },
      questions: {
        money: noul("Does the customer report a problem with money?"),
        topic: choice({ billing: "payments and invoices", bug: null, praise: "compliments" }, "What is the ticket about?"),
        severity: score(["none", { label: "some", examples: ["slow page"] }, "severe"], "How severe is it?"),
        written: { type: "choice", criteria: { yes: null, no: null } },
      },
    });
    expect(reply.model).toBe(stack().releaseId);
    expect(reply._request_id).toMatch(/^req_/);
    expect(Object.keys(reply.answers)).toEqual(["money", "topic", "severity", "written"]);

    const { money, topic, severity, written } = reply.answers;
    expectTypeOf(topic.choice).toEqualTypeOf<"billing" | "bug" | "praise">();
    expectTypeOf(written.choice).toEqualTypeOf<"yes" | "no">();
    expectTypeOf(severity.score).toEqualTypeOf<number>();
    expectTypeOf(money.noul).toEqualTypeOf<number>();
    expect(money.type).toBe("noul");
    expect(money.noul).toBeGreaterThanOrEqual(0);
    expect(money.noul).toBeLessThanOrEqual(1);
    expect(topic.type).toBe("choice");
    expect(Object.keys(topic.probabilities)).toEqual(["billing", "bug", "praise"]);
    expect(Object.values(topic.probabilities).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    expect(topic.choice).toBe(Object.entries(topic.probabilities).sort((a, b) => b[1] - a[1])[0]![0]);
    expect(severity).toMatchObject({ type: "score", legend: { "0": "none", "1": { label: "some", examples: ["slow page"] }, "2": "severe" } });
    expect(severity.score).toBeGreaterThanOrEqual(0);
    expect(severity.score).toBeLessThanOrEqual(2);
    expect(written.type).toBe("choice");
    expect(reply.usage.output_tokens).toBeGreaterThan(0);
    expect(Number.isInteger(reply.usage.input_tokens)).toBe(true);
  });

  it("sends the client's defaultModel when the request names none, and the request's model over it", async () => {
    const misnamed = stackClient(account.key.secret, { defaultModel: "no-such-model" });
    const err = await rejection(misnamed.systemOne({ state: "s", questions: { q: noul("?") } }));
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ status: 404, code: "model_not_found" });
    const reply = await misnamed.systemOne({ model: SHARED_ALIAS, state: "charged twice", questions: { q: noul("Is it about money?") } });
    expect(reply.model).toBe(stack().releaseId);
  });

  it("builds questions with the helpers, keeping the order of option names a JavaScript object would reorder", () => {
    expect(noul("Urgent?")).toEqual({ type: "noul", instructions: "Urgent?" });
    expect(noul(undefined, { true: "urgent", false: null })).toEqual({ type: "noul", criteria: { true: "urgent", false: null } });
    expect(choice(["billing", "bug"])).toEqual({ type: "choice", criteria: { billing: null, bug: null } });
    expect(choice({ a: "first" }, { rule: "pick one" })).toEqual({ type: "choice", criteria: { a: "first" }, instructions: { rule: "pick one" } });
    expect(score(["low", "high"])).toEqual({ type: "score", criteria: ["low", "high"] });
    const numbered = choice(["10", "2", "1"]);
    expect(numbered.criteria).toBeInstanceOf(Map);
    expect(stringifyJson(numbered)).toBe('{"type":"choice","criteria":{"10":null,"2":null,"1":null}}');
  });
});

describe("errors from the real service", () => {
  it("401: a wrong key is an AuthenticationError with the code, the message and the request id", async () => {
    const err = await rejection(stackClient("svc_0000000000000000.wrong").models.list());
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ name: "AuthenticationError", status: 401, code: "invalid_credentials" });
    expect((err as APIError).message.length).toBeGreaterThan(0);
    expect((err as APIError).requestId).toMatch(/^req_/);
    const { message, requestId } = err as APIError;
    expect((err as APIError).summary).toBe(`401 invalid_credentials: ${message} (request ${requestId})`);
  });

  it("404: an unknown batch, and another account's batch, are the same NotFoundError", async () => {
    const mine = await client.batches.create({ inputBytes: 1 });
    const other = await newAccount();
    // Each call is made when awaited: a second promise made up front would reject with no handler yet.
    for (const call of [() => client.batches.retrieve(UNKNOWN_BATCH), () => stackClient(other.key.secret).batches.retrieve(mine.id)]) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(NotFoundError);
      expect(err).toMatchObject({ status: 404, code: "not_found", message: "no batch with this id in this account" });
    }
  });

  it("409: submitting before the upload, and reading results before the end, are ConflictErrors", async () => {
    const batch = await client.batches.create({ inputBytes: 1 });
    expect(await rejection(client.batches.submit(batch.id))).toMatchObject({ name: "ConflictError", status: 409, code: "upload_incomplete" });
    expect(await rejection(client.batches.results(batch.id).toArray())).toBeInstanceOf(ConflictError);
    expect(await rejection(client.batches.results(batch.id).toArray())).toMatchObject({ code: "batch_not_finished" });
  });

  it("410: results after their retention period are a GoneError", async () => {
    const batch = await client.batches.create({ inputBytes: 1 });
    await finishDirectly(batch.id, 1, LIMITS.bulkDataRetentionMs + 60_000);
    const err = await rejection(client.batches.results(batch.id).toArray());
    expect(err).toBeInstanceOf(GoneError);
    expect(err).toMatchObject({ status: 410, code: "results_expired" });
  });

  it("422: an invalid body is an UnprocessableEntityError naming the problem", async () => {
    const err = await rejection(client.systemOne({ state: "s", questions: { q: choice(["only"]) } }));
    expect(err).toBeInstanceOf(UnprocessableEntityError);
    expect(err).toMatchObject({ status: 422, code: "invalid_request" });
    expect((err as Error).message).toMatch(/at least 2 options/);
  });

  it("429: an account limit is a RateLimitError with the wait it names; batch quotas too", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { tokens_per_second: 1, max_active_batches: 1 }));
    const limitedClient = stackClient(limited.key.secret, { maxRetries: 0 });
    const err = await rejection(limitedClient.systemOne({ state: "s", questions: { q: noul("?") } }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ status: 429, code: "rate_limited" });
    // The wait it names is what is left of the account's one-second window (a value the service
    // sent, not a measured time).
    expect((err as RateLimitError).retryAfterMs).toSatisfy((wait: number) => wait > 0 && wait <= 1000);

    await limitedClient.batches.create({ inputBytes: 1 });
    const quota = await rejection(limitedClient.batches.create({ inputBytes: 1 }));
    expect(quota).toBeInstanceOf(RateLimitError);
    expect(quota).toMatchObject({ code: "active_batch_limit", retryAfterMs: 60_000 });
  });

  it("other statuses are a plain APIError: a second upload of one batch's input (412)", async () => {
    const batch = await client.batches.create({ inputBytes: jsonl(noulRecord("a")).byteLength });
    await client.batches.upload(batch, jsonl(noulRecord("a")));
    const err = await rejection(client.batches.upload(batch, jsonl(noulRecord("b"))));
    expect(err).toBeInstanceOf(APIError);
    expect(Object.getPrototypeOf(err)).toBe(APIError.prototype);
    expect(err).toMatchObject({ status: 412, code: "already_uploaded" });
  });
});

describe("retries", () => {
  it("retry a 429 once the wait the service names has passed", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { requests_per_second: 1 }));
    for (let tries = 0; tries < 5; tries++) {
      const recorder = recordingFetch();
      // This second's one request goes first; the client's first attempt then lands in the same second, unless the second turned in between.
      await call("/v1/models", { token: limited.key.secret });
      const list = await stackClient(limited.key.secret, { fetch: recorder.fetch }).models.list();
      if (recorder.sent[0]!.status === 200) continue;
      expect(recorder.sent.map((s) => s.status)).toEqual([429, 200]);
      const asked = Number(recorder.sent[0]!.responseHeaders.get("retry-after-ms"));
      expect(asked).toBeGreaterThan(0);
      expect(recorder.sent[1]!.startedAt - recorder.sent[0]!.endedAt).toBeGreaterThanOrEqual(asked - 2);
      expect(list.models.length).toBeGreaterThan(0);
      return;
    }
    throw new Error("the client's request never shared a second with the one before it");
  });

  it("stop after maxRetries: a decision its account's token limit always refuses is sent 1 + maxRetries times", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { tokens_per_second: 1 }));
    const recorder = recordingFetch();
    const err = await rejection(stackClient(limited.key.secret, { fetch: recorder.fetch, maxRetries: 2 }).systemOne({ state: "s", questions: { q: noul("?") } }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect(recorder.sent.map((s) => s.status)).toEqual([429, 429, 429]);
    const again = recordingFetch();
    await rejection(stackClient(limited.key.secret, { fetch: again.fetch }).systemOne({ state: "s", questions: { q: noul("?") } }, { maxRetries: 0 }));
    expect(again.sent).toHaveLength(1);
  });

  it("retry a 529 (full lane), honouring retry-after-ms, then give the OverloadedError", async () => {
    const fake = await started(fakeServiceAnswering(529, { "retry-after-ms": "100", "retry-after": "1" }));
    const began = Date.now();
    const err = await rejection(fakeClient(fake).systemOne({ state: "s", questions: { q: noul("?") } }));
    expect(Date.now() - began).toBeGreaterThanOrEqual(200);
    expect(Date.now() - began).toBeLessThan(1000);
    expect(err).toBeInstanceOf(OverloadedError);
    expect(err).toMatchObject({ status: 529, code: "lane_full", requestId: "req_fake3" });
    expect(fake.requests).toBe(3);
  });

  it("back off exponentially after a 529 that names no wait", async () => {
    const fake = await started(fakeServiceAnswering(529));
    const began = Date.now();
    await rejection(fakeClient(fake, { maxRetries: 2 }).models.list());
    // 500 ms then 1000 ms, each less up to a quarter of jitter.
    expect(Date.now() - began).toBeGreaterThanOrEqual(1125);
    expect(Date.now() - began).toBeLessThan(3000);
    expect(fake.requests).toBe(3);
  });

  it("do not wait out a Retry-After over a minute: the caller gets the error at once", async () => {
    const fake = await started(fakeServiceAnswering(529, { "retry-after": "120" }));
    const err = await rejection(fakeClient(fake).models.list());
    expect(err).toMatchObject({ status: 529, retryAfterMs: 120_000 });
    expect(fake.requests).toBe(1);
  });

  it("never resend a decision after 503, 504, a timeout or a dropped connection", async () => {
    const unavailable = await started(fakeServiceAnswering(503, { "retry-after": "1" }));
    const timeout = await started(fakeServiceAnswering(504));
    const hanging = await started(fakeServiceHanging());
    const dropping = await started(fakeServiceDroppingConnections());
    const decide = (fake: Fake, options: ClientOptions = {}) => fakeClient(fake, { maxRetries: 5, ...options }).systemOne({ state: "s", questions: { q: noul("?") } });

    expect(await rejection(decide(unavailable))).toBeInstanceOf(ServiceUnavailableError);
    expect(await rejection(decide(timeout))).toBeInstanceOf(GatewayTimeoutError);
    const began = Date.now();
    const late = await rejection(decide(hanging, { timeout: 300 }));
    expect(late).toBeInstanceOf(APIConnectionTimeoutError);
    expect(late).toBeInstanceOf(APIConnectionError);
    expect(late).toMatchObject({ status: undefined, message: expect.stringMatching(/within 300 ms/) });
    expect(Date.now() - began).toBeLessThan(2000);
    const dropped = await rejection(decide(dropping));
    expect(dropped).toBeInstanceOf(APIConnectionError);
    expect(dropped).not.toBeInstanceOf(APIConnectionTimeoutError);
    for (const fake of [unavailable, timeout, hanging, dropping]) expect(fake.requests).toBe(1);
  });

  it("stop at once when the caller aborts, waiting or not", async () => {
    const hanging = await started(fakeServiceHanging());
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    expect(await rejection(fakeClient(hanging).models.list({ signal: controller.signal }))).toBeInstanceOf(APIUserAbortError);
    const full = await started(fakeServiceAnswering(529, { "retry-after": "30" }));
    const waiting = new AbortController();
    setTimeout(() => waiting.abort(), 100);
    const began = Date.now();
    expect(await rejection(fakeClient(full).models.list({ signal: waiting.signal }))).toBeInstanceOf(APIUserAbortError);
    expect(Date.now() - began).toBeLessThan(2000);
  });
});

describe("connections", () => {
  it(`keep at most ${LIMITS.httpConnectionsPerService} requests and connections open to one service for 100 calls at once`, async () => {
    const fake = await started(fakeServiceCountingConnections(50));
    const many = fakeClient(fake);
    await Promise.all(Array.from({ length: 100 }, (_, i) => many.systemOne({ state: `s${i}`, questions: { q: noul("?") } })));
    expect(fake.requests).toBe(100);
    expect(fake.maxInFlight).toBe(LIMITS.httpConnectionsPerService);
    expect(fake.maxSockets).toBeLessThanOrEqual(LIMITS.httpConnectionsPerService);
  });

  it("never follow a redirect: a 3xx is an APIError and the new address is not contacted", async () => {
    for (const status of [302, 307, 308] as const) {
      const fake = await started(fakeServiceRedirecting(status, `${stack().baseUrl}/v1/models`));
      const recorder = recordingFetch();
      const err = await rejection(fakeClient(fake, { apiKey: account.key.secret, fetch: recorder.fetch }).models.list());
      expect(err).toBeInstanceOf(APIError);
      expect(err).toMatchObject({ status, message: expect.stringMatching(/redirects are not followed/) });
      expect(recorder.sent.map((s) => s.url)).toEqual([`${fake.url}/v1/models`]);
      expect(fake.requests).toBe(1);
    }
  });
});

describe("client.batches", () => {
  it("create, upload a JSONL file by path (without the API key), submit, retrieve, wait and read results", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-batch-"));
    try {
      const file = join(dir, "input.jsonl");
      const input = jsonl(noulRecord("t-1"), noulRecord("t-2"));
      writeFileSync(file, input);
      const recorder = recordingFetch();
      const batches = stackClient(account.key.secret, { fetch: recorder.fetch }).batches;
      const key = `sdk-path-${Date.now()}`;
      const batch = await batches.create({ idempotencyKey: key, inputBytes: input.byteLength });
      remember(new URL(batch.upload!.url).searchParams.get("X-Amz-Signature")!);
      expect(batch).toMatchObject({ object: "batch", status: "uploading", idempotency_key: key, input_bytes: input.byteLength });
      expect(JSON.parse(recorder.sent[0]!.body!)).toEqual({ idempotency_key: key, input_bytes: input.byteLength });
      expect(batch.upload!.headers).toMatchObject({ "content-length": String(input.byteLength), "if-none-match": "*" });
      expect((await batches.create({ idempotencyKey: key, inputBytes: input.byteLength })).id).toBe(batch.id);
      // The same key with another size names another input: a conflict, not this batch.
      expect(await rejection(batches.create({ idempotencyKey: key, inputBytes: input.byteLength + 1 }))).toMatchObject({ name: "ConflictError", status: 409, code: "idempotency_conflict" });

      const uploaded = await batches.upload(batch, file);
      expect(uploaded.size).toBe(input.byteLength);
      const put = recorder.sent.find((s) => s.method === "PUT")!;
      expect(put.headers.get("authorization")).toBeNull();
      expect(put.headers.get("if-none-match")).toBe("*");
      expect(put.headers.get("content-length")).toBe(String(input.byteLength));
      // Once the input is there, the same key gives the same batch and no new destination.
      expect((await batches.create({ idempotencyKey: key, inputBytes: input.byteLength })).upload).toBeUndefined();

      expect((await batches.submit(batch.id)).status).toBe("queued");
      expect((await batches.submit(batch.id)).status).not.toBe("uploading");
      expect((await batches.retrieve(batch.id)).id).toBe(batch.id);
      const done = await batches.wait(batch.id, { pollInterval: 200 });
      expect(done).toMatchObject({ status: "completed", request_counts: { total: 2, completed: 2, failed: 0 } });
      const records = await batches.results(batch.id).toArray();
      expect(records.map((r) => r.custom_id)).toEqual(["t-1", "t-2"]);
      for (const record of records) {
        if (!("response" in record)) throw new Error(`record ${record.custom_id} failed: ${record.error.message}`);
        expect(record.response.answers.money).toMatchObject({ type: "noul" });
        // A file is sent as it is: its records name no model, so the service's default answered.
        expect(record.response.model).toBe(stack().releaseId);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("run: records in, the terminal batch and its results out, with progress, records defaulting to the client's model", async () => {
    const runner = stackClient(account.key.secret, { defaultModel: "no-such-model" });
    const seen: string[] = [];
    const { batch, results } = await runner.batches.run(
      [noulRecord("named", { model: SHARED_ALIAS }), noulRecord("defaulted"), { custom_id: "invalid", body: { state: "s", questions: { q: choice(["one"]) } } }],
      { pollInterval: 200, onProgress: (b) => seen.push(b.status) },
    );
    expect(batch).toMatchObject({ status: "completed", request_counts: { total: 3, completed: 1, failed: 2 } });
    expect(seen.at(-1)).toBe("completed");
    expect(seen.length).toBeGreaterThanOrEqual(1);
    const records = [];
    for await (const record of results) records.push(record);
    expect(records.map((r) => r.custom_id)).toEqual(["named", "defaulted", "invalid"]);
    expect(records[0]).toMatchObject({ response: { model: stack().releaseId, answers: { money: { type: "noul" } } } });
    expect(records[1]).toMatchObject({ error: { status: 404, code: "model_not_found" } });
    expect(records[2]).toMatchObject({ error: { status: 422, code: "invalid_request" } });
    expect(await results.toArray()).toEqual(records);
  });

  it("run: bytes are sent as they are, and a file the worker refuses ends a failed batch with no results", async () => {
    const { batch, results } = await client.batches.run(new TextEncoder().encode('{"custom_id":"a","body":{}}\n{not json\n'), { pollInterval: 200 });
    expect(batch).toMatchObject({ status: "failed", error: { code: "invalid_jsonl", line: 2 } });
    expect(await results.toArray()).toEqual([]);
  });

  it("run resumes the batch of its idempotency key instead of making another", async () => {
    const key = `sdk-resume-${Date.now()}`;
    const first = await client.batches.run([noulRecord("r-1")], { idempotencyKey: key, pollInterval: 200 });
    const again = await client.batches.run([noulRecord("r-1")], { idempotencyKey: key, pollInterval: 200 });
    expect(again.batch.id).toBe(first.batch.id);
    expect(again.batch.status).toBe("completed");
    expect((await again.results.toArray()).map((r) => r.custom_id)).toEqual(["r-1"]);
  });

  it("stop waiting when the caller aborts, leaving the batch as it is; an aborted run sends nothing", async () => {
    const batch = await client.batches.create({ inputBytes: 1 });
    const controller = new AbortController();
    const polls: string[] = [];
    setTimeout(() => controller.abort(), 300);
    const err = await rejection(client.batches.wait(batch.id, { pollInterval: 50, signal: controller.signal, onProgress: (b) => polls.push(b.status) }));
    expect(err).toBeInstanceOf(APIUserAbortError);
    expect((err as Error).message).toContain(`stopped waiting for batch ${batch.id}`);
    expect(polls.length).toBeGreaterThan(1);
    expect(new Set(polls)).toEqual(new Set(["uploading"]));
    expect((await client.batches.retrieve(batch.id)).status).toBe("uploading");
    // Aborted during a poll rather than between two: the same answer.
    const hanging = await started(fakeServiceHanging());
    const duringPoll = await rejection(fakeClient(hanging).batches.wait(batch.id, { signal: AbortSignal.timeout(100) }));
    expect(duringPoll).toMatchObject({ name: "APIUserAbortError", message: expect.stringContaining(`stopped waiting for batch ${batch.id}`) });

    const recorder = recordingFetch();
    const aborted = AbortSignal.abort();
    expect(await rejection(stackClient(account.key.secret, { fetch: recorder.fetch }).batches.run([noulRecord("x")], { signal: aborted }))).toBeInstanceOf(APIUserAbortError);
    expect(recorder.sent).toEqual([]);
  });

  it("cancel a batch that has not finished; a finished one is returned unchanged", async () => {
    const input = jsonl(noulRecord("c-1"));
    const batch = await client.batches.create({ inputBytes: input.byteLength });
    await client.batches.upload(batch, input);
    const cancelled = await client.batches.cancel(batch.id);
    expect(cancelled).toMatchObject({ id: batch.id, status: "cancelled" });
    expect(cancelled.finished_at).not.toBeNull();
    expect(await client.batches.cancel(batch.id)).toMatchObject({ status: "cancelled", finished_at: cancelled.finished_at });
    expect(await client.batches.results(batch.id).toArray()).toEqual([]);
  });

  it("list the account's batches newest first, page by page", async () => {
    const lister = await newAccount();
    const own = stackClient(lister.key.secret);
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await own.batches.create({ idempotencyKey: `list-${i}`, inputBytes: 1 })).id);
    const first = await own.batches.list({ limit: 2 });
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect(first.data.map((b) => b.id)).toEqual([made[2], made[1]]);
    const second = await own.batches.list({ limit: 2, after: first.next_cursor! });
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.data.map((b) => b.id)).toEqual([made[0]]);
    expect((await own.batches.list()).data).toHaveLength(3);
  });

  it("metadata given to create and run is returned by create, retrieve, cancel, every poll of run and list; list({ status }) lists only that status", async () => {
    const labeller = await newAccount();
    const recorder = recordingFetch();
    const own = stackClient(labeller.key.secret, { fetch: recorder.fetch });
    const pairs = { team: "support", ticket: "OPS-12" };
    const created = await own.batches.create({ inputBytes: 1, metadata: pairs });
    expect(created.metadata).toEqual(pairs);
    expect(JSON.parse(recorder.sent[0]!.body!)).toMatchObject({ input_bytes: 1, metadata: pairs });
    expect((await own.batches.retrieve(created.id)).metadata).toEqual(pairs);
    const plain = await own.batches.create({ inputBytes: 1 });
    expect(plain.metadata).toBeNull();
    expect(JSON.parse(recorder.sent.at(-1)!.body!)).not.toHaveProperty("metadata");
    const cancelled = await own.batches.cancel(created.id);
    expect(cancelled).toMatchObject({ status: "cancelled", metadata: pairs });

    const seen: Array<Record<string, string> | null> = [];
    const { batch: ran } = await own.batches.run([noulRecord("m-1")], { metadata: { run: "nightly" }, pollInterval: 200, onProgress: (b) => seen.push(b.metadata) });
    expect(ran).toMatchObject({ status: "completed", metadata: { run: "nightly" } });
    expect(seen.every((m) => m?.run === "nightly")).toBe(true);

    // One status each: the cancelled, the completed and the still uploading batch, with their metadata.
    const only = async (status: BatchStatus) => (await own.batches.list({ status })).data.map((b) => [b.id, b.metadata]);
    expect(await only("cancelled")).toEqual([[created.id, pairs]]);
    expect(await only("completed")).toEqual([[ran.id, { run: "nightly" }]]);
    expect(await only("uploading")).toEqual([[plain.id, null]]);
    expect(await only("running")).toEqual([]);
    expect((await own.batches.list()).data.map((b) => b.id)).toEqual([ran.id, plain.id, created.id]);
    recorder.sent.length = 0;
    expect((await own.batches.list({ status: "cancelled", limit: 1 }).toArray()).map((b) => b.id)).toEqual([created.id]);
    expect(new URL(recorder.sent[0]!.url).search).toBe("?limit=1&status=cancelled");
    expectTypeOf<ListBatchesParams["status"]>().toEqualTypeOf<BatchStatus | undefined>();

    // The service checks what the client sends as given.
    const tooMany = Object.fromEntries(Array.from({ length: METADATA_LIMITS.pairs + 1 }, (_, i) => [`k${i}`, "v"]));
    for (const metadata of [tooMany, { "": "v" }, { k: "v".repeat(METADATA_LIMITS.valueChars + 1) }, { k: 1 } as unknown as Record<string, string>]) {
      expect(await rejection(own.batches.create({ inputBytes: 1, metadata }))).toMatchObject({ name: "UnprocessableEntityError", status: 422 });
    }
    expect(await rejection(own.batches.list({ status: "finished" as BatchStatus }))).toMatchObject({ name: "UnprocessableEntityError", status: 422 });
  });

  it("iterate every batch of every page with for await, fetching each page when the loop reaches it", async () => {
    const lister = await newAccount();
    const recorder = recordingFetch();
    const own = new Client({ apiKey: lister.key.secret, baseURL: stack().baseUrl, fetch: recorder.fetch });
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await own.batches.create({ idempotencyKey: `iterate-${i}`, inputBytes: 1 })).id);
    recorder.sent.length = 0;
    const seen: string[] = [];
    for await (const batch of own.batches.list({ limit: 2 })) seen.push(batch.id);
    expect(seen).toEqual([made[2], made[1], made[0]]);
    expect(recorder.sent.map((r) => new URL(r.url).search)).toEqual(["?limit=2", `?limit=2&after=${made[1]}`]);
    // Leaving the loop early fetches no further page; pages() gives the pages themselves.
    recorder.sent.length = 0;
    for await (const batch of own.batches.list({ limit: 2 })) if (batch.id === made[2]) break;
    expect(recorder.sent).toHaveLength(1);
    const pages = [];
    for await (const page of own.batches.list({ limit: 2 }).pages()) pages.push(page.data.length);
    expect(pages).toEqual([2, 1]);
    expect((await own.batches.list({ limit: 1 }).toArray()).map((b) => b.id)).toEqual([made[2], made[1], made[0]]);
  });

  it("read results page by page as they are iterated, from any cursor", async () => {
    const batch = await client.batches.create({ inputBytes: 1 });
    await finishDirectly(batch.id, 2 * LIMITS.bulkResultsPage + 5);
    const recorder = recordingFetch();
    const reader = stackClient(account.key.secret, { fetch: recorder.fetch });
    const ids: string[] = [];
    for await (const record of reader.batches.results(batch.id)) {
      ids.push(record.custom_id);
      // Only the pages read so far have been fetched.
      expect(recorder.sent).toHaveLength(Math.floor((ids.length - 1) / LIMITS.bulkResultsPage) + 1);
    }
    expect(ids).toEqual(Array.from({ length: 45 }, (_, i) => `r${i + 1}`));
    expect(recorder.sent.map((s) => new URL(s.url).searchParams.get("after"))).toEqual(["0", "20", "40"]);
    const pages = [];
    for await (const page of reader.batches.results(batch.id, { after: 40 }).pages()) pages.push(page);
    expect(pages).toHaveLength(1);
    expect(pages[0]).toMatchObject({ object: "list", next_cursor: null });
    expect(pages[0]!.data.map((r) => r.custom_id)).toEqual(["r41", "r42", "r43", "r44", "r45"]);
  });

  it("refuse input that cannot be accepted before sending anything", async () => {
    const recorder = recordingFetch();
    const batches = stackClient(account.key.secret, { fetch: recorder.fetch }).batches;
    const tooMany = Array.from({ length: LIMITS.bulkFileRecords + 1 }, (_, i) => noulRecord(`m-${i}`));
    expect(await rejection(batches.run(tooMany))).toBeInstanceOf(InputError);
    expect(await rejection(batches.run([]))).toMatchObject({ name: "InputError", message: "the batch has no records" });
    expect(await rejection(batches.run(new Uint8Array()))).toMatchObject({ name: "InputError", message: "the batch file is empty" });
    expect(await rejection(batches.run(new Uint8Array(LIMITS.bulkFileBytes + 1)))).toMatchObject({ message: expect.stringMatching(/at most 26214400 bytes/) });
    expect(await rejection(batches.run(join(tmpdir(), "no-such-dir", "input.jsonl")))).toMatchObject({ message: expect.stringMatching(/cannot read the batch file/) });
    expect(await rejection(batches.upload({}, [noulRecord("x")]))).toBeInstanceOf(InputError);
    const remote = { url: "http://storage.example.test/batches/x/input.jsonl", method: "PUT" as const, headers: {}, expires_at: "" };
    expect(await rejection(batches.upload({ upload: remote }, [noulRecord("x")]))).toMatchObject({ message: expect.stringMatching(/unusable upload address.*plaintext http/) });
    for (const inputBytes of [0, 1.5, LIMITS.bulkFileBytes + 1, undefined]) {
      expect(await rejection(batches.create({ inputBytes } as { inputBytes: number }))).toMatchObject({ name: "InputError", message: expect.stringMatching(/^batches\.create takes \{ inputBytes \}/) });
    }
    expect(recorder.sent).toEqual([]);
  });

  it("upload refuses input of another length than the batch was created for with InputError, before sending it", async () => {
    const recorder = recordingFetch();
    const batches = stackClient(account.key.secret, { fetch: recorder.fetch }).batches;
    const input = jsonl(noulRecord("s-1"));
    const batch = await batches.create({ inputBytes: input.byteLength });
    expect(batch.input_bytes).toBe(input.byteLength);
    recorder.sent.length = 0;
    // Records are written with the client's model, so they are longer than the same records as a file.
    for (const other of [jsonl(noulRecord("s-10")), [noulRecord("s-1")]]) {
      expect(await rejection(batches.upload(batch, other))).toMatchObject({
        name: "InputError",
        message: expect.stringMatching(new RegExp(`^the input is \\d+ bytes, but this batch was created for ${input.byteLength} bytes`)),
      });
    }
    expect(recorder.sent).toEqual([]);
    // Checked on the client alone: a target naming its size and a destination no test serves is refused the same.
    const remote = { url: "https://storage.example.test/batches/x/input.jsonl", method: "PUT" as const, headers: {}, expires_at: "" };
    expect(await rejection(batches.upload({ upload: remote, input_bytes: input.byteLength + 1 }, input))).toBeInstanceOf(InputError);
    expect(recorder.sent).toEqual([]);
    expect((await batches.upload(batch, input)).size).toBe(input.byteLength);
    expect(recorder.sent.map((s) => [s.method, s.headers.get("content-length")])).toEqual([["PUT", String(input.byteLength)]]);
  });
});

describe("client.trainings", () => {
  // One training on the shared runtime (about 15 s); the other cases give the worker nothing to do.
  const GROUP_A = noul("Does this sentence belong to group A?");

  /** A client with both credentials of `user`: its API key, and its signed-in access token. */
  const trainerOf = (user: Account, options: ClientOptions = {}) => stackClient(user.key.secret, { accessToken: user.userToken, ...options });

  it("create from a file (the upload without any credential), wait until ready, decide with the trained model, read its report, retire it", { timeout: 180_000 }, async () => {
    const owner = await newAccount();
    const dir = mkdtempSync(join(tmpdir(), "sdk-training-"));
    try {
      const file = join(dir, "examples.jsonl");
      writeFileSync(file, await noulFile({ ...GROUP_A }, animalSentences()));
      const recorder = recordingFetch();
      const trainer = trainerOf(owner, { fetch: recorder.fetch });
      const key = `sdk-training-${Date.now()}`;
      const submitted = await trainer.trainings.create({ file, idempotencyKey: key });
      const size = readFileSync(file).byteLength;
      expect(submitted).toMatchObject({ object: "training", status: "queued", idempotency_key: key, base_model: SHARED_ALIAS, input_bytes: size });
      expect(submitted._request_id).toMatch(/^req_/);
      expect(JSON.parse(recorder.sent[0]!.body!)).toMatchObject({ idempotency_key: key, input_bytes: size });
      const put = recorder.sent.find((s) => s.method === "PUT")!;
      remember(new URL(put.url).searchParams.get("X-Amz-Signature")!);
      expect(put.headers.get("authorization")).toBeNull();
      expect(put.headers.get("content-length")).toBe(String(size));
      const sentWith = recorder.sent.filter((s) => s.method !== "PUT").map((s) => s.headers.get("authorization"));
      expect(sentWith.every((header) => header === `Bearer ${owner.userToken}`)).toBe(true);

      // The same key resumes the same training: nothing is uploaded again.
      expect((await trainer.trainings.create({ file, idempotencyKey: key })).id).toBe(submitted.id);
      expect(recorder.sent.filter((s) => s.method === "PUT")).toHaveLength(1);

      const seen: Training[] = [];
      const done = await trainer.trainings.wait(submitted.id, { pollInterval: 250, onProgress: (t) => seen.push(t) });
      expect(done.status, JSON.stringify(done)).toBe("ready");
      expect(done.model).toMatch(/^ft:svc-shared:[0-9a-f]{32}$/);
      expect(seen.at(-1)?.status).toBe("ready");
      expect(seen.some((t) => t.progress !== null && t.progress.examples_total === 48)).toBe(true);

      const reply = await trainer.systemOne({ model: done.model!, state: "A donkey was grazing beside the road.", questions: { q: GROUP_A } });
      expect(reply.model).toBe(done.model);
      expect(reply.answers.q.noul).toBeGreaterThan(0.5);

      const report = await trainer.trainings.report(done.id);
      expect(report).toMatchObject({ object: "training.report", training: done.id, model: done.model, decision: "accepted" });
      // The label audit: these labels are clean, so its few issues, if any, are all in the report; listed page by page, in its order.
      const audit = report.label_audit!;
      expect(audit).toMatchObject({ method: "confident_learning", examples: 48, has_more: false });
      expect(audit.issues).toHaveLength(audit.suspected);
      const ranked = audit.issues.map((issue, i) => ({ ...issue, rank: i + 1 }));
      expect(await trainer.trainings.labelIssues(done.id).toArray()).toEqual(ranked);
      const pages: number[][] = [];
      for await (const page of trainer.trainings.labelIssues(done.id, { limit: 1 }).pages()) pages.push(page.data.map((issue) => issue.rank));
      expect(pages.flat()).toEqual(ranked.map((issue) => issue.rank));
      expect(await trainer.trainings.labelIssues(done.id, { after: audit.suspected })).toMatchObject({ object: "list", data: [], has_more: false });
      expect((await trainer.models.evaluation(done.model!)).training).toBe(done.id);
      expect((await trainer.models.list()).models.find((m) => m.name === done.model)?.evaluation).toBe(`/v1/models/${encodeURIComponent(done.model!)}/evaluation`);
      expect((await trainer.trainings.list()).data.map((t) => t.id)).toEqual([done.id]);

      expect(await trainer.models.retire(done.model!)).toEqual({ id: done.model, object: "model", retired: true });
      expect(await rejection(trainer.systemOne({ model: done.model!, state: "A cat.", questions: { q: GROUP_A } }))).toBeInstanceOf(NotFoundError);
      expect(await rejection(trainer.models.retire(done.model!))).toMatchObject({ name: "NotFoundError", code: "model_not_found" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuse every training call of a client without an access token before sending anything, and decisions of one without an API key", async () => {
    const recorder = recordingFetch();
    const keyOnly = stackClient(account.key.secret, { fetch: recorder.fetch });
    const calls = [
      () => keyOnly.trainings.create({ file: join(tmpdir(), "no-such-dir", "examples.jsonl") }),
      () => keyOnly.trainings.submit(UNKNOWN_BATCH),
      () => keyOnly.trainings.retrieve(UNKNOWN_BATCH),
      () => keyOnly.trainings.list(),
      () => keyOnly.trainings.cancel(UNKNOWN_BATCH),
      () => keyOnly.trainings.report(UNKNOWN_BATCH),
      () => keyOnly.trainings.labelIssues(UNKNOWN_BATCH),
      () => keyOnly.trainings.wait(UNKNOWN_BATCH),
      () => keyOnly.models.retire("ft:svc-shared:0"),
    ];
    for (const call of calls) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as Error).message).toMatch(/^no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token, not an API key; pass \{ accessToken \} to new Client\(\) or set SVC_ACCESS_TOKEN/);
    }
    const tokenOnly = new Client({ accessToken: account.userToken, baseURL: stack().baseUrl, fetch: recorder.fetch });
    expect(await rejection(tokenOnly.systemOne({ state: "s", questions: { q: noul() } }))).toMatchObject({ name: "ConfigurationError", message: expect.stringMatching(/^no API key: .*SVC_API_KEY/) });
    expect(await rejection(tokenOnly.models.list())).toBeInstanceOf(ConfigurationError);
    expect(await rejection(tokenOnly.batches.create({ inputBytes: 1 }))).toBeInstanceOf(ConfigurationError);
    expect(recorder.sent).toEqual([]);
    // SVC_ACCESS_TOKEN when no option names a token; neither credential at all is refused at construction.
    await withEnv({ SVC_ACCESS_TOKEN: account.userToken, SVC_BASE_URL: stack().baseUrl }, async () => {
      expect((await new Client().trainings.list())).toMatchObject({ object: "list" });
    });
    await withEnv({ SVC_BASE_URL: stack().baseUrl }, () => {
      expect(() => new Client({ apiKey: "", accessToken: "" })).toThrow(/no API key: .*\{ accessToken \} or SVC_ACCESS_TOKEN/);
    });
    expect(inspect(trainerOf(account), { depth: 10, showHidden: true }).includes(account.userToken)).toBe(false);
  });

  it("are refused by the service with an API key as the access token: 401 wrong_credential_kind", async () => {
    const err = await rejection(stackClient(account.key.secret, { accessToken: account.key.secret }).trainings.list());
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ status: 401, code: "wrong_credential_kind" });
  });

  it("refuse a file the worker would refuse, naming its line, and a model its examples do not name, before sending anything", async () => {
    const recorder = recordingFetch();
    const trainings = trainerOf(account, { fetch: recorder.fetch }).trainings;
    const good = (await noulFile({ ...GROUP_A }, animalSentences())).split("\n");
    const bytes = (lines: string[]) => new TextEncoder().encode(lines.join("\n"));
    const badLabel = [good[0]!, good[1]!.replace('"labels":{"q":true}', '"labels":{"q":"yes"}'), ...good.slice(2)];
    expect(await rejection(trainings.create({ file: bytes(badLabel) }))).toMatchObject({
      name: "InputError",
      message: "the training file: line 2: labels.q: a noul question's label must be true or false",
    });
    expect(await rejection(trainings.create({ file: bytes(good.slice(0, 12)) }))).toMatchObject({ name: "InputError", message: expect.stringMatching(/every outcome needs at least 10/) });
    const examples = [{ custom_id: "a", body: { state: "A cat.", questions: { q: GROUP_A } }, labels: { q: true } }];
    expect(await rejection(trainings.create({ file: examples }))).toMatchObject({ name: "InputError", message: expect.stringMatching(/question "q": 1 example\(s\) of true; every outcome needs at least 10/) });
    expect(await rejection(trainings.create({ file: join(tmpdir(), "no-such-dir", "examples.jsonl") }))).toMatchObject({ message: expect.stringMatching(/^cannot read the training file/) });
    expect(await rejection(trainings.create({ file: bytes(good), model: stack().releaseId }))).toMatchObject({
      name: "InputError",
      message: expect.stringMatching(/the examples name the base "svc-shared" \(their body\.model\), not "/),
    });
    expect(recorder.sent).toEqual([]);
  });

  it("cancel a training that has not finished, list the account's trainings newest first page by page, and stop waiting when aborted", async () => {
    const lister = await newAccount();
    const trainings = trainerOf(lister).trainings;
    // Created without their file (so no worker sees them), as the first step of `create` makes them.
    const made: string[] = [];
    for (let i = 0; i < 2; i++) {
      const created = await call<Training>("/v1/trainings", { token: lister.userToken, body: { idempotency_key: `sdk-list-${i}`, input_bytes: 1 } });
      expect(created.status).toBe(201);
      remember(new URL(created.body.upload!.url).searchParams.get("X-Amz-Signature")!);
      made.push(created.body.id);
    }
    const first = await trainings.list({ limit: 1 });
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect(first.data.map((t) => t.id)).toEqual([made[1]]);
    const second = await trainings.list({ limit: 1, after: first.next_cursor! });
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.data.map((t) => t.id)).toEqual([made[0]]);
    expect((await trainings.list({ limit: 1 }).toArray()).map((t) => t.id)).toEqual([made[1], made[0]]);

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const stopped = await rejection(trainings.wait(made[0]!, { pollInterval: 50, signal: controller.signal }));
    expect(stopped).toMatchObject({ name: "APIUserAbortError", message: expect.stringContaining(`stopped waiting for training ${made[0]}`) });
    expect(await rejection(trainings.submit(made[0]!))).toMatchObject({ name: "ConflictError", code: "upload_incomplete" });
    expect(await rejection(trainings.report(made[0]!))).toMatchObject({ name: "ConflictError", code: "report_not_ready" });
    expect(await rejection(trainings.labelIssues(made[0]!))).toMatchObject({ name: "ConflictError", code: "report_not_ready" });
    expectTypeOf<ListLabelIssuesParams["after"]>().toEqualTypeOf<number | undefined>();

    // Listed by status: both are still uploading, none is ready.
    expect((await trainings.list({ status: "uploading" })).data.map((t) => t.id)).toEqual([made[1], made[0]]);
    expect((await trainings.list({ status: "ready" })).data).toEqual([]);
    expectTypeOf<ListTrainingsParams["status"]>().toEqualTypeOf<TrainingStatus | undefined>();

    for (const id of made) {
      const cancelled = await trainings.cancel(id);
      expect(cancelled).toMatchObject({ id, status: "cancelled", metadata: null });
      expect(await trainings.cancel(id)).toMatchObject({ status: "cancelled", finished_at: cancelled.finished_at });
    }
    // Metadata given at create comes back on the training; cancelled, it is listed among the cancelled.
    // Created without its file, as above: a training a worker has begun is not what this test is about
    // (CI once waited out this test's minute cancelling one that had just started: to look into).
    const made2 = await call<Training>("/v1/trainings", { token: lister.userToken, body: { idempotency_key: "sdk-labelled", input_bytes: 1, metadata: { team: "ml" } } });
    remember(new URL(made2.body.upload!.url).searchParams.get("X-Amz-Signature")!);
    const labelled = await trainings.retrieve(made2.body.id);
    expect(labelled.metadata).toEqual({ team: "ml" });
    expect(await trainings.cancel(labelled.id)).toMatchObject({ status: "cancelled", metadata: { team: "ml" } });
    expect((await trainings.list({ status: "cancelled" })).data.map((t) => [t.id, t.metadata])).toEqual([
      [labelled.id, { team: "ml" }],
      [made[1], null],
      [made[0], null],
    ]);
    expect(await rejection(trainings.retrieve(UNKNOWN_BATCH))).toMatchObject({ name: "NotFoundError", code: "not_found" });
    // Another account's trainings are the same 404.
    expect(await rejection(trainerOf(account).trainings.retrieve(made[0]!))).toBeInstanceOf(NotFoundError);
  });
});

describe("client.imageAssets", () => {
  const base64Of = (hex: string) => Buffer.from(hex, "hex").toString("base64");
  const signatureOf = (url: string) => remember(new URL(url).searchParams.get("X-Amz-Signature")!);

  it("uploads a JPEG in one call: create, the PUT with exactly the returned headers and no credential, complete; then reads it back", async () => {
    const bytes = await photo(320, 240);
    const recorder = recordingFetch();
    const images = stackClient(account.key.secret, { fetch: recorder.fetch }).imageAssets;
    const asset = await images.upload(bytes, { filename: "Holiday photo.JPG" });
    expect(asset).toMatchObject({
      object: "image_asset",
      status: "ready",
      purpose: "prediction",
      filename: "Holiday photo.JPG",
      source_bytes: bytes.byteLength,
      sha256: sha256(bytes),
      source: { format: "jpeg", width: 320, height: 240 },
      canonical: { width: 320, height: 240 },
      error: null,
    });
    expect(asset._request_id).toMatch(/^req_/);
    expectTypeOf(asset).toMatchTypeOf<ImageAsset>();

    expect(recorder.sent.map((s) => [s.method, s.status])).toEqual([["POST", 201], ["PUT", 200], ["POST", 200]]);
    const [created, put, completed] = recorder.sent as [Sent, Sent, Sent];
    expect(created.url).toBe(`${stack().baseUrl}/v1/image-assets`);
    expect(completed.url).toBe(`${stack().baseUrl}/v1/image-assets/${asset.id}/complete`);
    for (const apiCall of [created, completed]) expect(apiCall.headers.get("authorization")).toBe(`Bearer ${account.key.secret}`);
    // The PUT goes to the signed storage address, never under the API, with its headers and nothing else of the client's.
    signatureOf(put.url);
    expect(new URL(put.url).pathname.startsWith("/v1/")).toBe(false);
    expect(put.headers.get("authorization")).toBeNull();
    expect(Object.fromEntries([...put.headers].filter(([name]) => name !== "user-agent"))).toEqual({
      "content-length": String(bytes.byteLength),
      "if-none-match": "*",
      "x-amz-checksum-sha256": base64Of(sha256(bytes)),
    });

    expect(await images.retrieve(asset.id)).toEqual(asset);
    // Completing again changes nothing.
    expect(await images.complete(asset.id)).toEqual(asset);
  });

  it("takes a path (its name the filename) and a File, and the signed-in session's token when the client has no API key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-images-"));
    try {
      const file = join(dir, "diagram.png");
      writeFileSync(file, await photo(48, 32, "png"));
      const fromPath = await client.imageAssets.upload(file, { purpose: "training" });
      expect(fromPath).toMatchObject({ status: "ready", purpose: "training", filename: "diagram.png", source: { format: "png", width: 48, height: 32 } });

      const recorder = recordingFetch();
      const tokenOnly = new Client({ accessToken: account.userToken, baseURL: stack().baseUrl, fetch: recorder.fetch });
      const fromFile = await tokenOnly.imageAssets.upload(new File([await photo(40, 30)], "snap.jpeg"));
      expect(fromFile).toMatchObject({ status: "ready", filename: "snap.jpeg", canonical: { width: 40, height: 30 } });
      signatureOf(recorder.sent[1]!.url);
      const credentials = recorder.sent.map((s) => s.headers.get("authorization"));
      expect(credentials).toEqual([`Bearer ${account.userToken}`, null, `Bearer ${account.userToken}`]);
      // The same account's asset, whichever credential reads it; a client with both sends the API key.
      const both = recordingFetch();
      expect((await stackClient(account.key.secret, { accessToken: account.userToken, fetch: both.fetch }).imageAssets.retrieve(fromFile.id)).id).toBe(fromFile.id);
      expect(both.sent[0]!.headers.get("authorization")).toBe(`Bearer ${account.key.secret}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("throws an ImageRefusedError, an UnprocessableEntityError, with the refusal's code for a refused image", async () => {
    const refusals: [string, Uint8Array, string, ImageRefusal][] = [
      ["a PNG named .jpg", await photo(40, 30, "png"), "renamed.jpg", "image_type_mismatch"],
      ["a truncated JPEG", (await photo(320, 240)).subarray(0, 6000), "cut.jpg", "image_truncated"],
    ];
    for (const [name, bytes, filename, code] of refusals) {
      const err = await rejection(client.imageAssets.upload(bytes, { filename }));
      expect(err, name).toBeInstanceOf(ImageRefusedError);
      expect(err).toBeInstanceOf(UnprocessableEntityError);
      expect(err).toBeInstanceOf(APIError);
      expect(err).toMatchObject({ name: "ImageRefusedError", status: 422, code, requestId: expect.stringMatching(/^req_/) });
      expect((err as Error).message.length).toBeGreaterThan(0);
      expect(Object.keys(IMAGE_REFUSALS)).toContain((err as ImageRefusedError).code);
    }
    expectTypeOf<ImageRefusedError["code"]>().toEqualTypeOf<ImageRefusal>();
    // Any other 422 keeps its own class.
    const invalid = await rejection(client.systemOne({ state: "s", questions: { q: choice(["only"]) } }));
    expect(invalid).toBeInstanceOf(UnprocessableEntityError);
    expect(invalid).not.toBeInstanceOf(ImageRefusedError);
  });

  it("refuses input the service cannot accept before sending anything", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-images-"));
    try {
      const recorder = recordingFetch();
      const images = stackClient(account.key.secret, { fetch: recorder.fetch }).imageAssets;
      const jpeg = await photo(16, 16);
      const large = join(dir, "large.jpg");
      writeFileSync(large, new Uint8Array(LIMITS.imageSourceBytes + 1));
      // Each call is made when awaited: a promise made up front would reject with no handler yet.
      const refused: [() => Promise<unknown>, RegExp][] = [
        [() => images.upload(new Uint8Array(LIMITS.imageSourceBytes + 1), { filename: "big.jpg" }), /is 10485761 bytes; an image asset holds at most 10485760 bytes \(10 MiB\)/],
        [() => images.upload(large), /large\.jpg is 10485761 bytes/],
        [() => images.upload(new Blob([new Uint8Array(LIMITS.imageSourceBytes + 1)]), { filename: "big.png" }), /at most 10485760 bytes/],
        [() => images.upload(new Uint8Array(0), { filename: "empty.jpg" }), /the image is empty/],
        [() => images.upload(jpeg), /needs \{ filename \} for bytes/],
        [() => images.upload(new Blob([jpeg])), /needs \{ filename \}/],
        [() => images.upload(jpeg, { filename: "photo.gif" }), /^filename must be a name .* ending in \.jpg, \.jpeg or \.png/],
        [() => images.upload(jpeg, { filename: "../photo.jpg" }), /^filename must be a name \(no path/],
        [() => images.upload(jpeg, { filename: "a.jpg", purpose: "generation" as "training" }), /^purpose: /],
        [() => images.upload(join(dir, "missing.jpg")), /^cannot read the image .*missing\.jpg/],
        [() => images.create({ purpose: "prediction", filename: "a.jpg", source_bytes: 10, sha256: "z".repeat(64) }), /^sha256 must be the file's SHA-256 as 64 hex digits/],
        [() => images.retrieve(""), /image asset id is a non-empty string/],
      ];
      for (const [attempt, message] of refused) {
        const err = await rejection(attempt());
        expect(err, String(message)).toBeInstanceOf(InputError);
        expect((err as Error).message).toMatch(message);
      }
      expect(recorder.sent).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("retries a completion while another holds the asset, waiting the retry-after it names; other 409s and 404s are thrown at once", async () => {
    const bytes = await photo(64, 48);
    const created = await client.imageAssets.create({ purpose: "prediction", filename: "held.jpg", source_bytes: bytes.byteLength, sha256: sha256(bytes) });
    signatureOf(created.upload!.url);
    const recorder = recordingFetch();
    const images = stackClient(account.key.secret, { fetch: recorder.fetch }).imageAssets;
    expect(await rejection(images.complete(created.id))).toMatchObject({ name: "ConflictError", code: "upload_incomplete" });
    expect(recorder.sent).toHaveLength(1);
    expect((await fetch(created.upload!.url, { method: "PUT", headers: created.upload!.headers, body: bytes })).status).toBe(200);

    // Another completion's lease, as one running would hold it, for a little under the second the service asks to wait.
    await withDb((db) => db.query("UPDATE image_assets SET lease_token = gen_random_uuid(), lease_expires_at = now() + interval '800 milliseconds' WHERE id = $1", [created.id]));
    recorder.sent.length = 0;
    const ready = await images.complete(created.id);
    expect(ready).toMatchObject({ id: created.id, status: "ready", canonical: { width: 64, height: 48 } });
    expect(recorder.sent.map((s) => s.status)).toEqual([409, 200]);
    const asked = Number(recorder.sent[0]!.responseHeaders.get("retry-after")) * 1000;
    expect(asked).toBeGreaterThan(0);
    expect(recorder.sent[1]!.startedAt - recorder.sent[0]!.endedAt).toBeGreaterThanOrEqual(asked - 2);

    const other = await newAccount();
    for (const [images, id] of [[client.imageAssets, UNKNOWN_BATCH], [stackClient(other.key.secret).imageAssets, created.id]] as const) {
      expect(await rejection(images.retrieve(id))).toMatchObject({ name: "NotFoundError", status: 404, code: "not_found" });
      expect(await rejection(images.complete(id))).toMatchObject({ name: "NotFoundError", code: "not_found" });
    }
  });

  it("retries a completion after 503 (a completion cannot run twice), but never a create", async () => {
    const fake = await started(fakeServiceAnswering(503, { "retry-after-ms": "20" }));
    expect(await rejection(fakeClient(fake).imageAssets.complete(UNKNOWN_BATCH))).toBeInstanceOf(ServiceUnavailableError);
    expect(fake.requests).toBe(3);
    expect(await rejection(fakeClient(fake).imageAssets.complete(UNKNOWN_BATCH, { maxRetries: 0 }))).toMatchObject({ status: 503, code: "unavailable" });
    expect(fake.requests).toBe(4);
    const bytes = await photo(8, 8);
    expect(await rejection(fakeClient(fake, { maxRetries: 5 }).imageAssets.upload(bytes, { filename: "a.jpg" }))).toBeInstanceOf(ServiceUnavailableError);
    expect(fake.requests).toBe(5);
  });
});

describe("image decisions, image models and the image credit", () => {
  // A fresh account has no credit and no image model; a decision a trained image model answers (its
  // unknown_probability, a 402 for too little credit) needs a training of its own, which
  // test/image-models.test.ts runs. Here: what the real stack answers before any model does.
  const SHAPE = { shape: choice(["circle", "square", "triangle"], "Which shape is drawn?") };
  const images = [{ asset_id: UNKNOWN_BATCH }];
  const sessionOf = (user: Account, options: ClientOptions = {}) => stackClient(user.key.secret, { accessToken: user.userToken, ...options });

  it("imageCredit.retrieve: a fresh account has none, with the published price, whichever credential reads it", async () => {
    const recorder = recordingFetch();
    const credit = await sessionOf(account, { fetch: recorder.fetch }).imageCredit.retrieve();
    expect(credit).toEqual({ object: "credit_balance", balance_micro_usd: 0, reserved_micro_usd: 0, pricing: { currency: "USD", micro_usd_per_billable_token: 2 } });
    expect(credit._request_id).toMatch(/^req_/);
    expectTypeOf(credit).toMatchTypeOf<CreditBalance>();
    // A client with both credentials sends the API key, as for image assets; one with the token alone, the token.
    expect(recorder.sent.map((s) => [s.url, s.headers.get("authorization")])).toEqual([[`${stack().baseUrl}/v1/image-credit`, `Bearer ${account.key.secret}`]]);
    expect(await new Client({ accessToken: account.userToken, baseURL: stack().baseUrl }).imageCredit.retrieve()).toEqual(credit);
  });

  it("imageModels.list: a fresh account's is an empty list, read with the access token even by a client that has an API key", async () => {
    const recorder = recordingFetch();
    const listing = await sessionOf(account, { fetch: recorder.fetch }).imageModels.list();
    expect(listing).toEqual({ object: "list", data: [] });
    expect(listing._request_id).toMatch(/^req_/);
    expectTypeOf(listing.data).toEqualTypeOf<ImageModel[]>();
    expect(recorder.sent.map((s) => s.headers.get("authorization"))).toEqual([`Bearer ${account.userToken}`]);
  });

  it("an image decision naming an unknown model is a NotFoundError, from the session and with the API key", async () => {
    const recorder = recordingFetch();
    const session = sessionOf(account, { fetch: recorder.fetch });
    const model = "ft:svc-image:no-such-model";
    for (const decide of [() => session.imageDecisions.create({ model, state: "", questions: SHAPE, images }), () => session.systemOne({ model, state: "", questions: SHAPE, images })]) {
      const err = await rejection(decide());
      expect(err).toBeInstanceOf(NotFoundError);
      expect(err).toMatchObject({ status: 404, code: "model_not_found", requestId: expect.stringMatching(/^req_/) });
    }
    const [fromSession, withKey] = recorder.sent as [Sent, Sent];
    expect([fromSession.url, fromSession.headers.get("authorization")]).toEqual([`${stack().baseUrl}/v1/image-decisions`, `Bearer ${account.userToken}`]);
    expect([withKey.url, withKey.headers.get("authorization")]).toEqual([`${stack().baseUrl}/v1/systemone`, `Bearer ${account.key.secret}`]);
    // The same body both ways, the answers in the order given (the outcome order a model checks).
    expect(fromSession.body).toBe(withKey.body);
    expect(fromSession.body).toBe(stringifyJson({ model, state: "", questions: SHAPE, images }));
    // A request naming no model sends the client's defaultModel, as systemOne does.
    const misnamed = sessionOf(account, { defaultModel: "no-such-image-model" });
    expect(await rejection(misnamed.imageDecisions.create({ state: "", questions: SHAPE, images }))).toMatchObject({ name: "NotFoundError", code: "model_not_found" });
  });

  it("an image decision naming a text model, or the backbone itself, is the NotFoundError of an unknown model, saying why", async () => {
    const session = sessionOf(account);
    for (const [model, says] of [[SHARED_ALIAS, /reads text/], [IMAGE_BASE_ALIAS, /image backbone/]] as const) {
      for (const decide of [() => session.imageDecisions.create({ model, state: "", questions: SHAPE, images }), () => session.systemOne({ model, state: "", questions: SHAPE, images })]) {
        const err = await rejection(decide());
        expect(err).toBeInstanceOf(NotFoundError);
        expect(err).toMatchObject({ status: 404, code: "model_not_found" });
        expect((err as Error).message).toMatch(says);
      }
    }
  });

  it("imageModels and imageDecisions take the access token: a client without one sends nothing; an API key in its place is refused by the service", async () => {
    const recorder = recordingFetch();
    const keyOnly = stackClient(account.key.secret, { fetch: recorder.fetch });
    for (const call of [() => keyOnly.imageModels.list(), () => keyOnly.imageDecisions.create({ state: "", questions: SHAPE, images })]) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as Error).message).toMatch(/^no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token, not an API key/);
    }
    expect(recorder.sent).toEqual([]);
    const confused = stackClient(account.key.secret, { accessToken: account.key.secret });
    for (const call of [() => confused.imageModels.list(), () => confused.imageDecisions.create({ state: "", questions: SHAPE, images })]) {
      expect(await rejection(call())).toMatchObject({ name: "AuthenticationError", status: 401, code: "wrong_credential_kind" });
    }
  });

  it("402 is a PaymentRequiredError and 413 a PayloadTooLargeError; a choice answer may carry unknown_probability", () => {
    const errorOf = (status: number, code: string) => APIError.fromResponse(status, new Headers(), JSON.stringify({ error: { code, message: "m", status } }));
    const typed: [number, string, typeof APIError][] = [
      [402, "insufficient_credit", PaymentRequiredError],
      [403, "insufficient_scope", PermissionDeniedError],
      [401, "expired_key", AuthenticationError],
      [413, "context_too_large", PayloadTooLargeError],
      [413, "payload_too_large", PayloadTooLargeError],
      [422, "task_mismatch", UnprocessableEntityError],
    ];
    for (const [status, code, Class] of typed) {
      const err = errorOf(status, code);
      expect(Object.getPrototypeOf(err), code).toBe(Class.prototype);
      expect(err).toMatchObject({ name: Class.name, status, code });
    }
    expect(Object.getPrototypeOf(errorOf(412, "already_uploaded"))).toBe(APIError.prototype);
    expectTypeOf<ChoiceAnswer["unknown_probability"]>().toEqualTypeOf<number | undefined>();
  });
});

describe("client.usage", () => {
  const today = () => new Date().toISOString().slice(0, 10);

  it("retrieve: a fresh account's decision counts for its key, read with the access token; the query as given", { timeout: 60_000 }, async () => {
    const user = await newAccount();
    const reply = await stackClient(user.key.secret).systemOne({ state: "I was charged twice", questions: { refund: noul("Refund?") } });
    const recorder = recordingFetch();
    const session = stackClient(user.key.secret, { accessToken: user.userToken, fetch: recorder.fetch });
    // Usage is recorded just after the answer: poll briefly.
    const deadline = Date.now() + 10_000;
    let usage: WithRequestId<UsageReport>;
    let mine: UsageBucket | undefined;
    for (;;) {
      usage = await session.usage.retrieve({ groupBy: ["key"] });
      mine = usage.data.find((b) => b.key_id === user.key.id);
      if ((mine?.requests ?? 0) >= 1 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(mine, JSON.stringify(usage)).toMatchObject({ day: null, key_name: user.key.name, requests: 1, batch_records: 0, output_tokens: reply.usage.output_tokens, input_tokens: reply.usage.input_tokens });
    expect(usage).toMatchObject({ object: "usage", group_by: ["key"], end: today(), totals: { requests: 1 } });
    expect(usage._request_id).toMatch(/^req_/);
    expectTypeOf(usage.data).toEqualTypeOf<UsageBucket[]>();
    expectTypeOf(usage.totals).toEqualTypeOf<UsageCounts>();
    expectTypeOf(usage.group_by).toEqualTypeOf<UsageGroup[]>();
    // The access token even from a client that has an API key; only what was given is sent, group_by comma-separated.
    const last = recorder.sent.at(-1)!;
    expect(last.headers.get("authorization")).toBe(`Bearer ${user.userToken}`);
    expect(new URL(last.url).pathname).toBe("/v1/usage");
    expect([...new URL(last.url).searchParams]).toEqual([["group_by", "key"]]);

    const both = await session.usage.retrieve({ start: today(), end: today(), groupBy: ["day", "key"] });
    expect(both.group_by).toEqual(["day", "key"]);
    expect(both.data.map((b) => [b.day, b.key_id, b.requests])).toEqual([[today(), user.key.id, 1]]);
    expect([...new URL(recorder.sent.at(-1)!.url).searchParams]).toEqual([["start", today()], ["end", today()], ["group_by", "day,key"]]);
    const byDay = await session.usage.retrieve({ groupBy: "day" });
    expect(byDay.data).toHaveLength(USAGE_DAYS);
    expect(byDay.totals).toEqual(both.totals);
  });

  it("retrieve: a range or grouping the service refuses is an UnprocessableEntityError naming it", async () => {
    const session = new Client({ accessToken: account.userToken, baseURL: stack().baseUrl });
    for (const [params, message] of [
      [{ start: today(), end: "2000-01-01" }, /start \(.*\) is after end/],
      [{ start: "2000-01-01", end: today() }, new RegExp(`at most ${USAGE_DAYS} days at a time`)],
      [{ start: "2026-02-30" }, /a calendar day/],
      [{ groupBy: ["day", "day"] as UsageGroup[] }, /group_by is day, key, or both/],
    ] as const) {
      const err = await rejection(session.usage.retrieve(params));
      expect(err).toBeInstanceOf(UnprocessableEntityError);
      expect(err).toMatchObject({ status: 422, code: "invalid_request", requestId: expect.stringMatching(/^req_/) });
      expect((err as Error).message).toMatch(message);
    }
  });

  it("retrieve takes the access token: a client without one sends nothing; an API key in its place is refused by the service", async () => {
    const recorder = recordingFetch();
    const err = await rejection(stackClient(account.key.secret, { fetch: recorder.fetch }).usage.retrieve());
    expect(err).toBeInstanceOf(ConfigurationError);
    expect((err as Error).message).toMatch(/^no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token/);
    expect(recorder.sent).toEqual([]);
    const confused = stackClient(account.key.secret, { accessToken: account.key.secret });
    expect(await rejection(confused.usage.retrieve())).toMatchObject({ name: "AuthenticationError", status: 401, code: "wrong_credential_kind" });
  });
});

describe("client.keys", () => {
  const QUESTIONS = { refund: noul("Does the customer want money back?") };
  /** A client of the stack with `user`'s access token, recording what it sends. */
  const sessionOf = (user: Account) => {
    const recorder = recordingFetch();
    return { session: new Client({ accessToken: user.userToken, baseURL: stack().baseUrl, fetch: recorder.fetch }), sent: recorder.sent };
  };
  /** A key the stack made: its secret goes to the end-of-run log scan. */
  const remembered = <K extends CreatedKey>(key: K): K => {
    remember(key.secret);
    return key;
  };

  it("create a limited key, list it with its metadata, use it for a decision, be refused a batch and another model, revoke it", async () => {
    const user = await newAccount();
    const { session, sent } = sessionOf(user);
    const inAnHour = new Date(Date.now() + 3_600_000);
    const key = remembered(await session.keys.create({ name: "sdk limited", scope: "decisions", models: [SHARED_ALIAS], expiresAt: inAnHour }));
    // Sent with the access token; the Date as its ISO string.
    expect(sent[0]!.headers.get("authorization")).toBe(`Bearer ${user.userToken}`);
    expect(JSON.parse(sent[0]!.body!)).toEqual({ name: "sdk limited", expires_at: inAnHour.toISOString(), scope: "decisions", models: [SHARED_ALIAS] });
    expect(key).toMatchObject({ name: "sdk limited", status: "active", scope: "decisions", models: [SHARED_ALIAS], revoked_at: null });
    expect(Date.parse(key.expires_at!)).toBe(inAnHour.getTime());
    expect(API_KEY_PATTERN.exec(key.secret)?.[1]).toBe(key.id);
    expect(key._request_id).toMatch(/^req_/);
    expectTypeOf(key.scope).toEqualTypeOf<KeyScope | null>();
    expectTypeOf(key.status).toEqualTypeOf<KeyMetadata["status"]>();

    const listed: KeyList = await session.keys.list();
    const { secret: _secret, ...metadata } = key;
    expect(listed.keys[0]).toEqual(metadata);
    expect(listed.keys.map((k) => k.id)).toEqual([key.id, user.key.id]);
    expect(listed.keys[1]).toMatchObject({ scope: null, models: null, expires_at: null, status: "active" });
    expect(JSON.stringify(listed)).not.toContain(key.secret);

    const limited = stackClient(key.secret, { maxRetries: 0 });
    const reply = await limited.systemOne({ state: "I was charged twice", questions: QUESTIONS });
    expect(reply.answers.refund.noul).toBeGreaterThanOrEqual(0);
    const batch = await rejection(limited.batches.create({ inputBytes: 1 }));
    expect(batch).toBeInstanceOf(PermissionDeniedError);
    expect(batch).toMatchObject({ name: "PermissionDeniedError", status: 403, code: "insufficient_scope", requestId: expect.stringMatching(/^req_/) });
    // The release behind svc-shared is another name: the key may name only what it was created for.
    const otherName = await rejection(limited.systemOne({ model: stack().releaseId, state: "s", questions: QUESTIONS }));
    expect(otherName).toMatchObject({ name: "PermissionDeniedError", code: "insufficient_scope" });

    const revoked = await session.keys.revoke(key.id);
    expect(revoked).toMatchObject({ id: key.id, status: "revoked", revoked_at: expect.any(String) });
    expect(sent.at(-1)).toMatchObject({ method: "POST", url: `${stack().baseUrl}/v1/keys/${key.id}/revoke`, body: "{}" });
    expect((await session.keys.revoke(key.id)).revoked_at).toBe(revoked.revoked_at);
    const refused = await rejection(limited.systemOne({ state: "I was charged twice", questions: QUESTIONS }));
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect(refused).toMatchObject({ status: 401, code: "revoked_key" });
    expect((await session.keys.list()).keys.find((k) => k.id === key.id)?.status).toBe("revoked");
  });

  it("a key past its expiry is an AuthenticationError (401 expired_key) and listed as expired; a decisions_and_batches key may make batches", async () => {
    const { session } = sessionOf(await newAccount());
    const short = remembered(await session.keys.create({ name: "sdk short", expiresAt: new Date(Date.now() + 3000).toISOString(), scope: "decisions_and_batches" }));
    const client = stackClient(short.secret, { maxRetries: 0 });
    expect((await client.batches.create({ inputBytes: 1 })).status).toBe("uploading");
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(short.expires_at!) - Date.now()) + 500));
    const err = await rejection(client.models.list());
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ status: 401, code: "expired_key" });
    expect((await session.keys.list()).keys.find((k) => k.id === short.id)?.status).toBe("expired");
    expect(KEY_SCOPES).toEqual(["decisions", "decisions_and_batches"]);
  });

  it("the service's refusals: a past or malformed expiry, a blank name, no models are 422; another account's key is a NotFoundError", async () => {
    const { session, sent } = sessionOf(account);
    for (const [params, message] of [
      [{ name: "past", expiresAt: new Date(Date.now() - 60_000) }, /expires_at must be in the future/],
      [{ name: "day", expiresAt: "2030-01-01" }, /expires_at must be an RFC 3339 date-time/],
      [{ name: "  " }, /name must not be blank/],
      [{ name: "none", models: [] }, /at least one model/],
    ] as const) {
      const err = await rejection(session.keys.create(params));
      expect(err).toBeInstanceOf(UnprocessableEntityError);
      expect(err).toMatchObject({ status: 422, code: "invalid_request" });
      expect((err as Error).message).toMatch(message);
    }
    // An invalid Date is refused before anything is sent.
    const before = sent.length;
    expect(await rejection(session.keys.create({ name: "x", expiresAt: new Date(Number.NaN) }))).toBeInstanceOf(InputError);
    expect(sent.length).toBe(before);
    const stranger = await newAccount();
    const err = await rejection(session.keys.revoke(stranger.key.id));
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ status: 404, code: "not_found" });
    expect((await sessionOf(stranger).session.keys.list()).keys[0]).toMatchObject({ id: stranger.key.id, status: "active" });
  });

  it("take the access token: a client without one sends nothing; an API key in its place is refused by the service", async () => {
    const recorder = recordingFetch();
    const keyOnly = stackClient(account.key.secret, { fetch: recorder.fetch });
    for (const call of [() => keyOnly.keys.create({ name: "x" }), () => keyOnly.keys.list(), () => keyOnly.keys.revoke(account.key.id)]) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as Error).message).toMatch(/^no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token/);
    }
    expect(recorder.sent).toEqual([]);
    const confused = stackClient(account.key.secret, { accessToken: account.key.secret });
    expect(await rejection(confused.keys.list())).toMatchObject({ name: "AuthenticationError", status: 401, code: "wrong_credential_kind" });
  });
});

describe("client.webhooks", () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  /** An endpoint the stack made: its secret goes to the end-of-run log scan. */
  const remembered = <E extends WebhookEndpointWithSecret>(endpoint: E): E => {
    remember(endpoint.secret);
    return endpoint;
  };
  /** A batch of `user` created and cancelled before upload: its `batch.cancelled` event comes at once. */
  const cancelledBatch = async (user: Account): Promise<string> => {
    const batches = stackClient(user.key.secret).batches;
    const batch = await batches.create({ inputBytes: 10 });
    remember(new URL(batch.upload!.url).searchParams.get("X-Amz-Signature")!);
    expect((await batches.cancel(batch.id)).status).toBe("cancelled");
    return batch.id;
  };
  /** The one delivery the receiver got about `jobId`. */
  const deliveryOf = async (jobId: string): Promise<Received> => {
    const [received] = await receiver.waitFor(1, (r) => (JSON.parse(r.body) as WebhookEvent).data.id === jobId);
    return received!;
  };

  it("create, list, retrieve, a real delivery verified with its secret, rotateSecret (either secret verifies), deliveries page by page, delete", { timeout: 120_000 }, async () => {
    const user = await newAccount();
    const recorder = recordingFetch();
    const session = new Client({ accessToken: user.userToken, baseURL: stack().baseUrl, fetch: recorder.fetch });
    const endpoint = remembered(await session.webhooks.create({ url: receiver.url, events: ["batch.cancelled"], description: "sdk" }));
    expect(recorder.sent[0]!.headers.get("authorization")).toBe(`Bearer ${user.userToken}`);
    expect(JSON.parse(recorder.sent[0]!.body!)).toEqual({ url: receiver.url, events: ["batch.cancelled"], description: "sdk" });
    expect(endpoint).toMatchObject({ object: "webhook_endpoint", url: receiver.url, events: ["batch.cancelled"], description: "sdk", secret_rotated_at: null });
    expect(endpoint.secret).toMatch(WEBHOOK_SECRET_PATTERN);
    expect(endpoint._request_id).toMatch(/^req_/);
    expectTypeOf(endpoint).toExtend<WebhookEndpointWithSecret>();

    const { secret: first, ...metadata } = endpoint;
    const listed = await session.webhooks.list();
    expect(listed).toEqual({ object: "list", data: [metadata] });
    expect(await session.webhooks.retrieve(endpoint.id)).toEqual(metadata);
    expectTypeOf(listed.data).toEqualTypeOf<WebhookEndpoint[]>();
    expect(JSON.stringify(listed)).not.toContain(first);

    // A real delivery, verified with the secret create gave: as an argument, as the client's option, from SVC_WEBHOOK_SECRET.
    const firstJob = await cancelledBatch(user);
    const delivered = await deliveryOf(firstJob);
    const event = await session.webhooks.verify(delivered.body, delivered.headers, first);
    expect(event).toMatchObject({ type: "batch.cancelled", data: { object: "batch", id: firstJob, status: "cancelled", metadata: null } });
    expectTypeOf(event).toEqualTypeOf<WebhookEvent>();
    const receiving = new Client({ apiKey: user.key.secret, baseURL: stack().baseUrl, webhookSecret: first });
    expect(await receiving.webhooks.verify(delivered.body, delivered.headers)).toEqual(event);
    expect(inspect(receiving, { depth: 10, showHidden: true }).includes(first)).toBe(false);
    await withEnv({ SVC_WEBHOOK_SECRET: first, SVC_API_KEY: user.key.secret, SVC_BASE_URL: stack().baseUrl }, async () => {
      expect(await new Client().webhooks.verify(delivered.body, new Headers(delivered.headers as Record<string, string>))).toEqual(event);
    });
    // Refused: a tampered body, another secret, a delivery too old, a header missing.
    for (const [body, headers, secret, opts] of [
      [delivered.body.replace("cancelled", "completed"), delivered.headers, first, {}],
      [delivered.body, delivered.headers, `whsec_${Buffer.alloc(32, 7).toString("base64")}`, {}],
      [delivered.body, delivered.headers, first, { now: new Date(Date.now() + 10 * 60_000) }],
      [delivered.body, { ...delivered.headers, "webhook-signature": undefined }, first, {}],
    ] as const) {
      const err = await rejection(session.webhooks.verify(body, headers, secret, opts));
      expect(err).toBeInstanceOf(WebhookVerificationError);
      expect(err).toBeInstanceOf(ContractVerificationError);
    }
    // A delivery held back is accepted with a wider tolerance.
    expect(await session.webhooks.verify(delivered.body, delivered.headers, first, { now: new Date(Date.now() + 10 * 60_000), toleranceSeconds: 3600 })).toEqual(event);

    const rotated = remembered(await session.webhooks.rotateSecret(endpoint.id));
    expect(recorder.sent.at(-1)).toMatchObject({ method: "POST", url: `${stack().baseUrl}/v1/webhooks/${endpoint.id}/rotate_secret`, body: "{}" });
    expect(rotated).toMatchObject({ id: endpoint.id, secret_rotated_at: expect.any(String) });
    expect(rotated.secret).toMatch(WEBHOOK_SECRET_PATTERN);
    expect(rotated.secret).not.toBe(first);
    const secondJob = await cancelledBatch(user);
    const afterRotation = await deliveryOf(secondJob);
    for (const secret of [rotated.secret, first]) expect((await session.webhooks.verify(afterRotation.body, afterRotation.headers, secret)).data.id).toBe(secondJob);
    // The delivery before the rotation was signed with the first secret alone.
    expect(await rejection(session.webhooks.verify(delivered.body, delivered.headers, rotated.secret))).toBeInstanceOf(WebhookVerificationError);

    // Both deliveries in the log, newest first; a page of one, then the next after its last id.
    let log: WebhookDelivery[] = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      log = await session.webhooks.deliveries.list(endpoint.id).toArray();
      if (log.length === 2 && log.every((d) => d.status === "delivered")) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(log.map((d) => [d.job_id, d.event_type, d.status, d.attempts, d.last_status_code, d.last_error])).toEqual([
      [secondJob, "batch.cancelled", "delivered", 1, 200, null],
      [firstJob, "batch.cancelled", "delivered", 1, 200, null],
    ]);
    expect(log.map((d) => d.event_id)).toEqual([afterRotation.headers["webhook-id"], delivered.headers["webhook-id"]]);
    const page = await session.webhooks.deliveries.list(endpoint.id, { limit: 1 });
    expect(page).toEqual({ object: "list", data: [log[0]], has_more: true });
    expect(page._request_id).toMatch(/^req_/);
    const before = recorder.sent.length;
    const pages = [];
    for await (const each of session.webhooks.deliveries.list(endpoint.id, { limit: 1 }).pages()) pages.push(each.data.map((d) => d.id));
    expect(pages).toEqual([[log[0]!.id], [log[1]!.id]]);
    expect(recorder.sent.slice(before).map((s) => [...new URL(s.url).searchParams])).toEqual([[["limit", "1"]], [["limit", "1"], ["after", log[0]!.id]]]);
    expect((await session.webhooks.deliveries.list(endpoint.id, { after: log[0]!.id })).data.map((d) => d.id)).toEqual([log[1]!.id]);

    expect(await session.webhooks.delete(endpoint.id)).toEqual({ id: endpoint.id, object: "webhook_endpoint", deleted: true });
    expect(recorder.sent.at(-1)).toMatchObject({ method: "DELETE", url: `${stack().baseUrl}/v1/webhooks/${endpoint.id}` });
    for (const gone of [() => session.webhooks.retrieve(endpoint.id), () => session.webhooks.delete(endpoint.id), () => session.webhooks.deliveries.list(endpoint.id)]) {
      expect(await rejection(gone())).toMatchObject({ name: "NotFoundError", status: 404, code: "not_found" });
    }
    expect((await session.webhooks.list()).data).toEqual([]);
  });

  it(`the ${WEBHOOK_LIMITS.endpoints + 1}th endpoint is a ConflictError (409 webhook_endpoint_limit); what the service refuses is a 422; another account's endpoint is not found`, { timeout: 60_000 }, async () => {
    const user = await newAccount();
    const session = new Client({ accessToken: user.userToken, baseURL: stack().baseUrl });
    const made: WebhookEndpointWithSecret[] = [];
    for (let i = 0; i < WEBHOOK_LIMITS.endpoints; i++) made.push(remembered(await session.webhooks.create({ url: `http://127.0.0.1:9/${i}`, events: [WEBHOOK_EVENTS[i % WEBHOOK_EVENTS.length]!] })));
    const err = await rejection(session.webhooks.create({ url: "http://127.0.0.1:9/more", events: ["batch.failed"] }));
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ status: 409, code: "webhook_endpoint_limit", requestId: expect.stringMatching(/^req_/) });
    expect((await session.webhooks.list()).data.map((e) => e.id)).toEqual(made.map((e) => e.id).reverse());

    const fresh = new Client({ accessToken: (await newAccount()).userToken, baseURL: stack().baseUrl });
    for (const [params, message] of [
      [{ url: "http://127.0.0.1:9/", events: ["batch.running"] }, /event must be one of/],
      [{ url: "http://hooks.example.com/", events: ["batch.failed"] }, /https/],
      [{ url: "http://127.0.0.1:9/", events: [] }, /at least one event/],
    ] as const) {
      // The types refuse an unknown event; a JavaScript caller can still send one, and the service says no.
      const refused = await rejection(fresh.webhooks.create(params as unknown as Parameters<typeof fresh.webhooks.create>[0]));
      expect(refused).toBeInstanceOf(UnprocessableEntityError);
      expect(refused).toMatchObject({ status: 422, code: "invalid_request" });
      expect((refused as Error).message).toMatch(message);
    }
    expect(await rejection(fresh.webhooks.retrieve(made[0]!.id))).toBeInstanceOf(NotFoundError);
    expect(await rejection(fresh.webhooks.rotateSecret(made[0]!.id))).toBeInstanceOf(NotFoundError);
    expect((await session.webhooks.retrieve(made[0]!.id)).secret_rotated_at).toBeNull();
  });

  it("take the access token: a client without one sends nothing; verify needs a secret, and sends nothing", async () => {
    const recorder = recordingFetch();
    const keyOnly = stackClient(account.key.secret, { fetch: recorder.fetch });
    const id = crypto.randomUUID();
    for (const call of [
      () => keyOnly.webhooks.create({ url: receiver.url, events: ["batch.failed"] }),
      () => keyOnly.webhooks.list(),
      () => keyOnly.webhooks.retrieve(id),
      () => keyOnly.webhooks.delete(id),
      () => keyOnly.webhooks.rotateSecret(id),
      () => keyOnly.webhooks.deliveries.list(id),
    ]) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as Error).message).toMatch(/^no access token: training, usage, key management, webhooks, image models and image decisions take the signed-in user's access token/);
    }
    const noSecret = await rejection(keyOnly.webhooks.verify("{}", { "webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,x" }));
    expect(noSecret).toBeInstanceOf(ConfigurationError);
    expect((noSecret as Error).message).toMatch(/^no webhook secret: pass the endpoint's secret .* or set SVC_WEBHOOK_SECRET/);
    expect(recorder.sent).toEqual([]);
    const confused = stackClient(account.key.secret, { accessToken: account.key.secret });
    expect(await rejection(confused.webhooks.list())).toMatchObject({ name: "AuthenticationError", status: 401, code: "wrong_credential_kind" });
  });
});

describe("the packed package", () => {
  it("installs from its tarball with npm and makes a real call under plain Node, without Bun", { timeout: 300_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-pack-"));
    try {
      const env = plainNodeEnv();
      expect(() => run("sh", ["-c", "command -v bun"], { env })).toThrow();
      run("npm", ["pack", "--pack-destination", dir], { cwd: SDK_DIR, env });
      const tarball = join(dir, `decision-service-sdk-${VERSION}.tgz`);
      const files = run("tar", ["-tzf", tarball], { env }).split("\n").filter(Boolean).sort();
      expect(files).toContain("package/dist/index.js");
      expect(files).toContain("package/dist/index.d.ts");
      expect(files).toContain("package/dist/settings.js");
      expect(files).toContain("package/dist/settings.d.ts");
      expect(files).toContain("package/README.md");
      expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([]);

      const app = join(dir, "app");
      mkdirSync(app);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "sdk-user", private: true, type: "module" }));
      run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: app, env });
      expect(readdirSync(join(app, "node_modules")).filter((name) => !name.startsWith(".")).sort()).toEqual(["@decision-service", "zod"]);

      writeFileSync(
        join(app, "first-call.mjs"),
        `import { Client, noul, NotFoundError, VERSION } from "@decision-service/sdk";
import { resolveSettings } from "@decision-service/sdk/settings";
const client = new Client();
const { models } = await client.models.list();
const reply = await client.systemOne({ state: "I was charged twice", questions: { money: noul("Is it about money?") } });
const missing = await client.batches.retrieve("${UNKNOWN_BATCH}").catch((err) => err);
console.log(JSON.stringify({ version: VERSION, models: models.map((m) => m.name), model: reply.model, noul: reply.answers.money.noul, notFound: missing instanceof NotFoundError, settings: resolveSettings(process.env).source, bun: typeof Bun }));
`,
      );
      const out = run("node", ["first-call.mjs"], { cwd: app, env: { ...env, SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl } });
      const result = JSON.parse(out.trim().split("\n").at(-1)!);
      expect(result).toMatchObject({ version: "0.1.0", models: expect.arrayContaining([stack().releaseId]), model: stack().releaseId, notFound: true, settings: "environment", bun: "undefined" });
      expect(result.noul).toBeGreaterThanOrEqual(0);

      // The declarations work for a strict TypeScript user with Node's own module resolution.
      writeFileSync(
        join(app, "typed.ts"),
        `import { Client, choice, type CreditBalance, type DecisionResponse } from "@decision-service/sdk";
import { resolveSettings, type Settings } from "@decision-service/sdk/settings";
export const settingsOf = (env: Record<string, string | undefined>): Settings => resolveSettings(env);
export async function topic(client: Client): Promise<"billing" | "bug"> {
  const reply = await client.systemOne({ state: "s", questions: { topic: choice(["billing", "bug"]) } });
  const whole: DecisionResponse = reply;
  return whole.model === "" ? "bug" : reply.answers.topic.choice;
}
export async function needsReview(client: Client, asset_id: string): Promise<boolean> {
  const reply = await client.imageDecisions.create({ model: "m", state: "", questions: { shape: choice(["circle", "square"]) }, images: [{ asset_id }] });
  const { choice: best, probabilities, unknown_probability = 0 } = reply.answers.shape;
  const credit: CreditBalance = await client.imageCredit.retrieve();
  return credit.balance_micro_usd >= 0 && unknown_probability > (1 - unknown_probability) * probabilities[best];
}
`,
      );
      writeFileSync(
        join(app, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", lib: ["ES2023", "DOM"], types: [], strict: true, noEmit: true }, files: ["typed.ts"] }),
      );
      run("node", [join(import.meta.dirname, "..", "node_modules", "typescript", "bin", "tsc"), "-p", app], { cwd: app, env });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("has the version of its package.json", () => {
    const pkg = JSON.parse(readFileSync(join(SDK_DIR, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    expect(pkg).toMatchObject({ name: "@decision-service/sdk", version: VERSION, engines: { node: ">=20" }, dependencies: { zod: "4.6.7" } });
    expect(Object.keys(pkg.dependencies)).toEqual(["zod"]);
  });
});
