/**
 * POST /v1/systemone end to end: the real Worker, sidecar and runtime with the default model.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { DecisionResponse } from "../contract/decision.ts";
import { LIMITS, SHARED_ALIAS } from "../contract/limits.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import { setSettings, setStatus } from "../ops/accounts.ts";
import { pointAlias, registerRelease, retireRelease } from "../ops/releases.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { call, newAccount, query, remember, stack, usageRows, withDb } from "./support/api.ts";
import { listen } from "./support/fake-server.ts";
import { apiKeyRouteSecurity, expectError } from "./support/security.ts";

let account: Awaited<ReturnType<typeof newAccount>>;

beforeAll(async () => {
  account = await newAccount();
});

const decide = (body: unknown, token = account.key.secret) => call<Record<string, unknown>>("/v1/systemone", { token, body });

const ticket = {
  state: { ticket: "The invoice was charged twice this month.", customer: "ACME" },
  questions: {
    urgent: { type: "noul", instructions: "Does the customer report a problem with money?" },
    topic: { type: "choice", instructions: "What is the ticket about?", criteria: { billing: "payments and invoices", bug: null, praise: "compliments" } },
    severity: { type: "score", instructions: "How severe is it?", criteria: ["none", { label: "some", examples: ["slow page"] }, "severe"] },
  },
};

describe("POST /v1/systemone", () => {
  it("answers noul, choice and score questions with the release actually used, and records the usage", async () => {
    const reply = await decide({ model: SHARED_ALIAS, ...ticket });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const response = DecisionResponse.parse(reply.body);
    expect(response.model).toBe(stack().releaseId);
    expect([...response.answers.keys()]).toEqual(["urgent", "topic", "severity"]);

    const { urgent, topic, severity } = Object.fromEntries(response.answers);
    expect(urgent?.type).toBe("noul");
    if (topic?.type !== "choice" || severity?.type !== "score") throw new Error("wrong answer types");
    expect([...topic.probabilities.keys()]).toEqual(["billing", "bug", "praise"]);
    expect(topic.choice).toBe([...topic.probabilities].sort((a, b) => b[1] - a[1])[0]![0]);
    expect([...topic.probabilities.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    expect(Object.fromEntries(severity.legend)).toEqual({ "0": "none", "1": { label: "some", examples: ["slow page"] }, "2": "severe" });
    expect([...severity.probabilities.keys()]).toEqual(["0", "1", "2"]);
    expect(severity.score).toBeGreaterThanOrEqual(0);
    expect(severity.score).toBeLessThanOrEqual(2);

    expect(Number.isInteger(response.usage.input_tokens)).toBe(true);
    // Each question is read about the state (the 3-option choice twice: its options in key order and
    // reversed), and about the content-free state unless the sidecar already keeps that reading
    // (other tests on this stack ask the same questions).
    expect([4, 8]).toContain(response.usage.output_tokens);
    // The logical input: the state once and each question once, whatever the runtime had kept.
    expect(response.usage.billable_input_tokens).toBeGreaterThan(0);
    const usage = await usageRows(reply.requestId!);
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({
      account_id: account.accountId,
      key_id: account.key.id,
      release_id: stack().releaseId,
      source: "realtime",
      input_tokens: response.usage.input_tokens,
      output_tokens: response.usage.output_tokens,
      billable_input_tokens: response.usage.billable_input_tokens,
    });
  });

  it("says where the time went, hop by hop, in Server-Timing: names and milliseconds only", async () => {
    const decide = () =>
      fetch(`${stack().baseUrl}/v1/systemone`, {
        method: "POST",
        headers: { authorization: `Bearer ${account.key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: SHARED_ALIAS, ...ticket }),
      });
    // The first time a sidecar meets a question's labels it tokenizes them ("tokenize"); the same
    // request again has nothing to learn and goes straight to its passes.
    await (await decide()).text();
    const res = await decide();
    expect(res.status).toBe(200);
    const header = res.headers.get(SERVER_TIMING_HEADER) ?? "";
    const hops = Timings.parse(header);
    // The key and the model were kept from the requests before (auth/key-cache.ts): no key-model
    // query at the edge; the sidecar confirmed them (key-confirm) while the passes ran. No identity
    // hop: every pass's response carries the runtime's identity. No usage hop: the usage row is
    // written after the answer, off the customer's wait.
    expect([...hops.keys()].slice(0, 3)).toEqual(["quota", "sidecar", "registry"]);
    expect([...hops.keys()].sort()).toEqual(["key-confirm", "queue", "quota", "registry", "score", "sidecar"]);
    for (const ms of hops.values()) expect(ms).toBeGreaterThanOrEqual(0);
    // The sidecar's own hops happen inside the edge's call to it.
    expect(hops.get("sidecar")!).toBeGreaterThanOrEqual(hops.get("score")!);
    expect(header).toMatch(/^([a-z][a-z0-9-]*;dur=\d+\.\d\d)(, [a-z][a-z0-9-]*;dur=\d+\.\d\d)*$/);
  });

  it("reads a key the isolate has not kept in one query with the model (key-model), and keeps it for the next requests", async () => {
    const fresh = await newAccount();
    const first = await call("/v1/systemone", { token: fresh.key.secret, body: { model: SHARED_ALIAS, ...ticket } });
    expect(first.status).toBe(200);
    const hops = Timings.parse(first.headers.get(SERVER_TIMING_HEADER));
    expect(hops.has("key-model")).toBe(true);
    expect(hops.has("key-confirm")).toBe(false);
    // Another model name is read (and kept) on its own: the kept key has no resolution for it yet.
    const byId = await call("/v1/systemone", { token: fresh.key.secret, body: { model: stack().releaseId, ...ticket } });
    expect(Timings.parse(byId.headers.get(SERVER_TIMING_HEADER)).has("key-model")).toBe(true);
    const kept = await call("/v1/systemone", { token: fresh.key.secret, body: { model: SHARED_ALIAS, ...ticket } });
    const keptHops = Timings.parse(kept.headers.get(SERVER_TIMING_HEADER));
    expect([keptHops.has("key-model"), keptHops.has("key-confirm")]).toEqual([false, true]);
    // A wrong secret with the kept key's id is refused against the kept digest.
    const wrong = fresh.key.secret.slice(0, -1) + (fresh.key.secret.endsWith("A") ? "B" : "A");
    expectError(await call("/v1/systemone", { token: wrong, body: { model: SHARED_ALIAS, ...ticket } }), 401, "invalid_credentials");
  });

  it("refuses a kept key on its very next request once revoked, or once its account is disabled, with nothing answered or recorded", async () => {
    for (const change of ["revoke", "disable"] as const) {
      const owner = await newAccount();
      const ask = () => call("/v1/systemone", { token: owner.key.secret, body: { model: SHARED_ALIAS, ...ticket } });
      expect((await ask()).status).toBe(200);
      const keptReply = await ask();
      expect(Timings.parse(keptReply.headers.get(SERVER_TIMING_HEADER)).has("key-confirm")).toBe(true);
      if (change === "revoke") await query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [owner.key.id]);
      else await withDb((db) => setStatus(db, owner.accountId, "disabled"));
      const refused = await ask();
      expectError(refused, 401, change === "revoke" ? "revoked_key" : "account_disabled");
      // The sidecar ran it under the kept key and found it no longer standing: no usage row.
      expect(await usageRows(refused.requestId!)).toEqual([]);
      expect(await query("SELECT count(*)::int AS n FROM usage_records WHERE key_id = $1", [owner.key.id])).toEqual([{ n: 2 }]);
      expectError(await ask(), 401, change === "revoke" ? "revoked_key" : "account_disabled");
    }
  });

  it("answers a kept key revoked since with its 401 even where the sidecar refuses the request itself", async () => {
    const owner = await newAccount();
    const ask = (state: string) => call("/v1/systemone", { token: owner.key.secret, body: { model: SHARED_ALIAS, state, questions: { q: { type: "noul" } } } });
    expect((await ask("a short ticket")).status).toBe(200);
    // A state over the runtime's tokens per pass: the edge's byte checks let it through, the sidecar's admission refuses it.
    const long = Array.from({ length: 6000 }, (_, i) => `word${i}`).join(" ");
    const refusedBySidecar = await ask(long);
    expectError(refusedBySidecar, 422, "invalid_request");
    expect(JSON.stringify(refusedBySidecar.body)).toMatch(/at most \d+ per pass/);
    // Answered from the kept key: the sidecar was called, and no key-model query was made.
    expect([...Timings.parse(refusedBySidecar.headers.get(SERVER_TIMING_HEADER)).keys()]).toEqual(["quota", "sidecar"]);
    await query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [owner.key.id]);
    expectError(await ask(long), 401, "revoked_key");
  });

  it("answers a wrong key before a bad body, and a revoked key or a moved alias on the very next request", async () => {
    const other = await newAccount();
    const wrong = other.key.secret.slice(0, -1) + (other.key.secret.endsWith("A") ? "B" : "A");
    expectError(await call("/v1/systemone", { token: wrong, rawBody: "{" }), 401, "invalid_credentials");
    expectError(await call("/v1/systemone", { token: other.key.secret, rawBody: "{" }), 422, "invalid_request");

    const alias = `moving-${other.accountId}`;
    await withDb((db) => pointAlias(db, alias, stack().releaseId));
    expect((await call("/v1/systemone", { token: other.key.secret, body: { model: alias, ...ticket } })).status).toBe(200);
    await query("DELETE FROM model_aliases WHERE alias = $1", [alias]);
    expectError(await call("/v1/systemone", { token: other.key.secret, body: { model: alias, ...ticket } }), 404, "model_not_found");
    await query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [other.key.id]);
    expectError(await call("/v1/systemone", { token: other.key.secret, body: { model: SHARED_ALIAS, ...ticket } }), 401, "revoked_key");
  });

  it("gives the same numbers for the same input, by alias or by release id", async () => {
    const byAlias = DecisionResponse.parse((await decide({ model: SHARED_ALIAS, ...ticket })).body);
    const byId = DecisionResponse.parse((await decide({ model: stack().releaseId, ...ticket })).body);
    // `input_tokens` counts what the runtime evaluated: the second finds the first's state kept (the
    // same account), which depends on what ran before; everything else is the same.
    const { input_tokens: first, ...aliasUsage } = byAlias.usage;
    const { input_tokens: second, ...idUsage } = byId.usage;
    expect({ ...byId, usage: idUsage }).toEqual({ ...byAlias, usage: aliasUsage });
    expect(second).toBeLessThanOrEqual(first);
  });

  it("uses the shared alias when no model is named, and accepts text and array states, null instructions and noul criteria", async () => {
    const reply = await decide({
      state: ["first event", { second: true }],
      questions: { ok: { type: "noul", instructions: null, criteria: { true: "all events succeeded", false: null } } },
    });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(DecisionResponse.parse(reply.body).model).toBe(stack().releaseId);
    const text = await decide({ state: "plain text state", questions: { q: { type: "noul", instructions: { ask: "is it text?" } } } });
    expect(text.status).toBe(200);
  });

  it("reads a 255-option choice in several passes without truncating any option", async () => {
    const criteria = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option-${i}`, i % 3 === 0 ? null : `description ${i}`]));
    const reply = await decide({ state: "pick a number", questions: { big: { type: "choice", criteria } } });
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const answer = DecisionResponse.parse(reply.body).answers.get("big");
    if (answer?.type !== "choice") throw new Error("not a choice");
    expect([...answer.probabilities.keys()]).toEqual(Object.keys(criteria));
    expect([...answer.probabilities.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    // Ten chunk passes of at most 26 options, and at most one final pass.
    expect([10, 11]).toContain(DecisionResponse.parse(reply.body).usage.output_tokens);
  });

  describe("models", () => {
    it("answers byte-identical 404s for an unknown model and one the account may not use", async () => {
      const other = await newAccount();
      const privateId = `private-${other.accountId}`;
      await withDb((db) =>
        registerRelease(db, { id: privateId, fingerprint: "b".repeat(64), url: "https://gpu.example.test", token_env: "SVC_RUNTIME_SECRET", release_date: "2026-11-01", description: "", owners: [other.accountId], sidecar_url: null }),
      );
      const forbidden = await fetch(`${stack().baseUrl}/v1/systemone`, {
        method: "POST",
        headers: { authorization: `Bearer ${account.key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: privateId, ...ticket }),
      });
      const unknown = await fetch(`${stack().baseUrl}/v1/systemone`, {
        method: "POST",
        headers: { authorization: `Bearer ${account.key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: `no-such-${other.accountId}`, ...ticket }),
      });
      expect([forbidden.status, unknown.status]).toEqual([404, 404]);
      const [a, b] = [Buffer.from(await forbidden.arrayBuffer()), Buffer.from(await unknown.arrayBuffer())];
      expect(a.equals(b)).toBe(true);
      expect(JSON.parse(a.toString()).error.code).toBe("model_not_found");
      expect(forbidden.headers.get("content-type")).toBe(unknown.headers.get("content-type"));
    });

    it("stops serving a retired release and an alias that points at it", async () => {
      const id = `retiring-${account.accountId}`;
      await withDb(async (db) => {
        await registerRelease(db, { id, fingerprint: "c".repeat(64), url: "https://gpu.example.test", token_env: "SVC_RUNTIME_SECRET", release_date: "2026-11-01", description: "", owners: null, sidecar_url: null });
        await pointAlias(db, `alias-${id}`, id);
        await retireRelease(db, id);
      });
      for (const model of [id, `alias-${id}`]) expectError(await decide({ model, ...ticket }), 404, "model_not_found");
    });

    it("refuses to answer from a runtime whose identity is not the registry's (503, no answer, no usage)", async () => {
      const id = `impostor-${account.accountId}`;
      await withDb((db) =>
        registerRelease(db, {
          id,
          fingerprint: "d".repeat(64),
          url: stack().runtimeUrl,
          token_env: "SVC_RUNTIME_SECRET",
          release_date: "2026-11-01",
          description: "",
          owners: null,
          sidecar_url: stack().sidecarUrl,
        }),
      );
      try {
        const reply = await decide({ model: id, ...ticket });
        expectError(reply, 503, "identity_mismatch");
        expect(reply.body).not.toHaveProperty("answers");
        expect(await usageRows(reply.requestId!)).toHaveLength(0);
        const log = readFileSync(join(stack().logDir, "sidecar.log"), "utf8");
        expect(log).toContain(`refusing release ${id}`);
      } finally {
        // Left registered, the impostor would turn the shared stack's /health to 503 for every later file.
        await withDb((db) => retireRelease(db, id));
      }
    });
  });

  describe("a sidecar behind a proxy", () => {
    // A fake of what a TLS proxy in front of a GPU host answers while the sidecar behind it restarts
    // (or of a sidecar answering garbage): faults the real sidecar cannot be made to show on demand.
    it("answers 503 with Retry-After when the proxy answers 502/503/504 itself, and 502 for malformed output", async () => {
      let answer = { status: 502, body: "<html>502 Bad Gateway</html>" };
      const proxy = await listen((_req, res) => {
        res.writeHead(answer.status, { "content-type": "text/html" });
        res.end(answer.body);
      });
      const id = `proxied-${account.accountId}`;
      await withDb((db) =>
        registerRelease(db, { id, fingerprint: "e".repeat(64), url: "https://gpu.example.test", token_env: "SVC_RUNTIME_SECRET", release_date: "2026-11-01", description: "", owners: [account.accountId], sidecar_url: proxy.url }),
      );
      try {
        for (const status of [502, 503, 504]) {
          answer = { status, body: "<html>upstream unavailable</html>" };
          const reply = await decide({ model: id, ...ticket });
          expectError(reply, 503, "unavailable");
          expect(reply.headers.get("retry-after")).toBe("1");
        }
        answer = { status: 200, body: "not json" };
        expectError(await decide({ model: id, ...ticket }), 502, "bad_gateway");
      } finally {
        await withDb((db) => retireRelease(db, id));
        await proxy.stop();
      }
    });
  });

  describe("validation", () => {
    const noul = { type: "noul", instructions: "ok?" };
    const options = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`o${i}`, null]));
    const cases: Array<[string, unknown, RegExp]> = [
      ["no state", { questions: { q: noul } }, /state/],
      ["a number as state", { state: 7, questions: { q: noul } }, /state must be a JSON object, an array or text/],
      ["no questions", { state: "s" }, /questions/],
      ["an empty questions object", { state: "s", questions: {} }, /questions must hold at least one question/],
      ["an unknown question type", { state: "s", questions: { q7: { type: "rank" } } }, /questions\.q7\.type/],
      ["a choice with one option", { state: "s", questions: { q2: { type: "choice", criteria: options(1) } } }, /questions\.q2\.criteria: a choice needs at least 2 options/],
      ["a choice with 256 options", { state: "s", questions: { q2: { type: "choice", criteria: options(256) } } }, /questions\.q2\.criteria: a choice has at most 255 options/],
      ["a choice without criteria", { state: "s", questions: { q2: { type: "choice" } } }, /questions\.q2\.criteria/],
      ["a score with one level", { state: "s", questions: { s1: { type: "score", criteria: ["only"] } } }, /questions\.s1\.criteria: a score needs at least 2 levels/],
      ["a score with 11 levels", { state: "s", questions: { s1: { type: "score", criteria: Array(11).fill("l") } } }, /questions\.s1\.criteria: a score has at most 10 levels/],
      ["a score level that is null", { state: "s", questions: { s1: { type: "score", criteria: ["a", null] } } }, /questions\.s1\.criteria\.1/],
      ["an unknown field in a question", { state: "s", questions: { q: { ...noul, critera: {} } } }, /questions\.q/],
      ["noul criteria beyond true and false", { state: "s", questions: { q: { ...noul, criteria: { maybe: "x" } } } }, /questions\.q\.criteria/],
      // This stack has the image flags on (test/images.test.ts and test/image-models.test.ts turn them off).
      ["an image named by something else than a finalized asset's id", { state: "s", questions: { q: noul }, images: [{ asset_id: "a" }] }, /images\.0\.asset_id: .*URLs and encoded images are not accepted/],
      ["a model that is not a string", { model: 5, state: "s", questions: { q: noul } }, /model/],
    ];
    it.each(cases)("refuses %s with 422 naming the field", async (_, body, message) => {
      const reply = await decide(body);
      expectError(reply, 422, "invalid_request");
      expect((reply.body as { error: { message: string } }).error.message).toMatch(message);
    });

    it("refuses a body over 1 MiB and JSON nested deeper than 32 levels", async () => {
      const big = await call("/v1/systemone", { token: account.key.secret, rawBody: JSON.stringify({ state: "x".repeat(LIMITS.decisionBodyBytes), questions: { q: noul } }) });
      expectError(big, 422, "invalid_request");
      let deep: unknown = "leaf";
      for (let i = 0; i < LIMITS.jsonDepth; i++) deep = { d: deep };
      const tooDeep = await decide({ state: deep, questions: { q: noul } });
      expectError(tooDeep, 422, "invalid_request");
      expect((tooDeep.body as { error: { message: string } }).error.message).toMatch(/deeper than 32/);
    });

    it("refuses a request whose passes cannot fit, before any pass runs", async () => {
      const before = await query<{ n: string }>("SELECT count(*) AS n FROM usage_records WHERE account_id = $1", [account.accountId]);
      // One pass over 4,096 tokens: the sidecar counts it exactly and refuses it by name.
      const longPass = await decide({ state: "word ".repeat(5000), questions: { long: noul } });
      expectError(longPass, 422, "invalid_request");
      expect((longPass.body as { error: { message: string } }).error.message).toMatch(/questions\.long/);
      // More than 65,536 reserved tokens in all: the edge refuses it from the byte bound.
      const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`q${i}`, noul]));
      const tooMuch = await decide({ state: "y".repeat(2000), questions: many });
      expectError(tooMuch, 422, "invalid_request");
      expect((tooMuch.body as { error: { message: string } }).error.message).toMatch(/at most 65536/);
      const after = await query<{ n: string }>("SELECT count(*) AS n FROM usage_records WHERE account_id = $1", [account.accountId]);
      expect(after[0]!.n).toBe(before[0]!.n);
    });
  });

  describe("quotas", () => {
    it("throttles every time a request whose reservation exceeds the token quota", async () => {
      const small = await newAccount();
      await withDb((db) => setSettings(db, small.accountId, { tokens_per_second: 100 }));
      for (let i = 0; i < 3; i++) {
        const reply = await decide(ticket, small.key.secret);
        expectError(reply, 429, "rate_limited");
        expect(reply.headers.get("retry-after")).toBe("1");
        await new Promise((r) => setTimeout(r, Number(reply.headers.get("retry-after-ms"))));
      }
    });
  });

  apiKeyRouteSecurity({ method: "POST", path: "/v1/systemone", body: { state: "s", questions: { q: { type: "noul", instructions: "ok?" } } } });
});

describe("bodies are not persisted", () => {
  it("leaves no trace of a decision's state in any table", async () => {
    // The end-of-run log scan looks for it too.
    const marker = remember(`marker-${crypto.randomUUID()}`);
    const reply = await decide({ state: { note: marker }, questions: { q: { type: "noul", instructions: `contains ${marker}?` } } });
    expect(reply.status).toBe(200);
    // The answer's probability, written with its 15-17 significant digits, stands for the response body in the log scan.
    const answer = DecisionResponse.parse(reply.body).answers.get("q");
    if (answer?.type === "noul" && String(answer.noul).length >= 16) remember(String(answer.noul));
    const tables = await query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
    expect(tables.length).toBeGreaterThanOrEqual(5);
    for (const { table_name } of tables) {
      const hits = await query(`SELECT 1 FROM "${table_name}" t WHERE to_jsonb(t)::text LIKE $1`, [`%${marker}%`]);
      expect(hits, table_name).toHaveLength(0);
    }
  });
});
