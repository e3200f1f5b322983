/**
 * Conformance of real-time decisions and models to ../shared/spec/decision-service.md, as a client
 * that sends only what the specification names and checks only what it states: the request and
 * response shapes of noul, choice and score, the validation bounds, authentication, the identical
 * 404 of an unknown or forbidden model, and GET /v1/models.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { expectOk, expectStatus, get, obj, post, readChoice, send, SpecDecision, SpecNoul, walk, type Json, type Reply } from "./client.ts";
import { account, registerPrivateModel, runtimeAddresses, type Account } from "./operator.ts";

const SHARED = "svc-shared";
const noul = { type: "noul", instructions: "Is it about money?" };
const topic = { type: "choice", instructions: "What is it about?", criteria: { billing: "payments and invoices", bug: null } };
const severity = { type: "score", instructions: "How severe is it?", criteria: ["none", { label: "severe", examples: ["charged twice"] }] };
const decide = (token: string | undefined, body: unknown) => post("/v1/systemone", token, body);
const options = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`o${i}`, null]));
const levels = (n: number) => Array.from({ length: n }, (_, i) => `level ${i}`);

let owner: Account;
beforeAll(async () => {
  owner = await account();
});

/** The reply is 200 with a decision whose answers are keyed by exactly these question IDs. */
function decision(reply: Reply, questionIds: string[]) {
  expectStatus(reply, 200);
  const response = SpecDecision.parse(reply.body);
  expect(Object.keys(response.answers).sort()).toEqual([...questionIds].sort());
  return response;
}

describe("Decision request and response", () => {
  it("Decision response: noul, choice and score answered under the same question IDs, with the model used and integer usage", async () => {
    const reply = await decide(owner.key.secret, {
      model: SHARED,
      state: { ticket: "The invoice was charged twice this month." },
      questions: { "10": noul, topic, "sev erity": severity },
    });
    const response = decision(reply, ["10", "topic", "sev erity"]);
    expect(SpecNoul.parse(response.answers["10"]).type).toBe("noul");

    const choice = readChoice(response.answers.topic as Json, ["billing", "bug"]);
    // The selected option is the most probable one (key order breaks ties), and a confidence is given.
    const best = Math.max(...Object.values(choice.probabilities));
    expect(choice.probabilities[choice.selected]).toBe(best);
    expect(choice.numbers.some((n) => n >= 0 && n <= 1)).toBe(true);

    // Score: probabilities per level, their expected zero-based score, and the legend as it was sent.
    const score = obj(response.answers["sev erity"] as Json);
    const perLevel = Object.values(score).filter((v) => v !== null && typeof v === "object" && Object.values(v).length === 2 && Object.values(v).every((p) => typeof p === "number"));
    expect(perLevel, JSON.stringify(score)).toHaveLength(1);
    const p = Object.values(perLevel[0]!) as number[];
    expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    const expected = p.reduce((sum, pi, i) => sum + i * pi, 0);
    expect(Object.values(score).some((v) => typeof v === "number" && Math.abs(v - expected) < 1e-6), `expected score ${expected} in ${JSON.stringify(score)}`).toBe(true);
    expect(Object.values(score).some((v) => v !== null && typeof v === "object" && JSON.stringify(Object.values(v)) === JSON.stringify(severity.criteria))).toBe(true);

    // The release actually used is an accessible model behind the requested alias.
    const listed = await get("/v1/models", owner.key.secret);
    const entries = [...walk(listed.body)].map(([, v]) => v).filter((v): v is Json[] | { [k: string]: Json } => v !== null && typeof v === "object");
    expect(entries.some((e) => Object.values(e).includes(response.model) && Object.values(e).some((a) => Array.isArray(a) && a.includes(SHARED))), listed.text).toBe(true);
  });

  it("Decision request: state may be an object, an array or text, and instructions may be absent or null", async () => {
    for (const [state, question] of [
      [{ note: "paid twice" }, { type: "noul" }],
      [["paid", "twice"], { type: "noul", instructions: null }],
      ["paid twice", noul],
    ] as const) {
      SpecNoul.parse(decision(await decide(owner.key.secret, { model: SHARED, state, questions: { q: question } }), ["q"]).answers.q);
    }
  });

  it("Versioning: an exact release ID selects that release, as the alias does", async () => {
    const viaAlias = decision(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { q: noul } }), ["q"]);
    const viaId = decision(await decide(owner.key.secret, { model: viaAlias.model, state: "s", questions: { q: noul } }), ["q"]);
    expect(viaId.model).toBe(viaAlias.model);
  });
});

describe("Limits and validation (422 for an invalid request body)", () => {
  it("Limits: choice options 2-255 (1 and 256 are 422; 2 is answered; 255 is a valid body)", async () => {
    for (const n of [1, 256]) expectStatus(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { c: { type: "choice", criteria: options(n) } } }), 422);
    readChoice(decision(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { topic } }), ["topic"]).answers.topic as Json, ["billing", "bug"]);
    // Answering 255 options takes the 270M model about a minute here: a valid body naming a model
    // that does not exist meets only the unknown model's 404, where 256 options are an invalid body.
    const missing = `no-such-model-${Date.now()}`;
    expectStatus(await decide(owner.key.secret, { model: missing, state: "s", questions: { c: { type: "choice", criteria: options(255) } } }), 404);
  });

  it("Limits: score levels 2-10 (1 and 11 are 422; 2 and 10 are answered)", async () => {
    for (const n of [1, 11]) expectStatus(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { s: { type: "score", criteria: levels(n) } } }), 422);
    decision(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { severity } }), ["severity"]);
    decision(await decide(owner.key.secret, { model: SHARED, state: "s", questions: { s: { type: "score", criteria: levels(10) } } }), ["s"]);
  });

  it("Limits: a decision request body over 1 MiB is 422", async () => {
    const body = JSON.stringify({ model: SHARED, state: "x".repeat(1024 * 1024), questions: { q: noul } });
    expectStatus(await send("POST", "/v1/systemone", { token: owner.key.secret, raw: body }), 422);
  });

  it("Limits: JSON depth 32 is answered, 33 is 422", async () => {
    // The body object is the first level, `state` the second.
    const nested = (depth: number): Json => (depth === 0 ? "leaf" : [nested(depth - 1)]);
    decision(await decide(owner.key.secret, { model: SHARED, state: nested(31), questions: { q: noul } }), ["q"]);
    expectStatus(await decide(owner.key.secret, { model: SHARED, state: nested(32), questions: { q: noul } }), 422);
  });

  it("Errors: 422 for a body without state or questions, an unknown question type, a choice without criteria, or text that is not JSON", async () => {
    for (const body of [
      { model: SHARED, questions: { q: noul } },
      { model: SHARED, state: "s" },
      { model: SHARED, state: "s", questions: { q: { type: "rank" } } },
      { model: SHARED, state: "s", questions: { q: { type: "choice" } } },
    ]) {
      expectStatus(await decide(owner.key.secret, body), 422);
    }
    expectStatus(await send("POST", "/v1/systemone", { token: owner.key.secret, raw: '{"state": "s", "questions": ' }), 422);
  });
});

describe("Authentication", () => {
  const body = { model: SHARED, state: "s", questions: { q: noul } };

  it("Authentication rule 1 / Errors: 401 for a missing or invalid credential, or a key not sent as a Bearer token", async () => {
    expectStatus(await decide(undefined, body), 401);
    expectStatus(await get("/v1/models"), 401);
    const secret = owner.key.secret;
    const altered = secret.slice(0, -1) + (secret.endsWith("A") ? "B" : "A");
    for (const token of ["not-a-key", altered]) {
      expectStatus(await decide(token, body), 401);
      expectStatus(await get("/v1/models", token), 401);
    }
    expectStatus(await send("POST", "/v1/systemone", { json: body, headers: { authorization: secret } }), 401);
    expectStatus(await send("GET", "/v1/models", { headers: { authorization: `Basic ${Buffer.from(`x:${secret}`).toString("base64")}` } }), 401);
  });

  it("Authentication rule 3: models and decisions take an API key, not the user's access token", async () => {
    expectStatus(await decide(owner.userToken, body), 401);
    expectStatus(await get("/v1/models", owner.userToken), 401);
  });

  it("Errors: 401 for a revoked key", async () => {
    const other = await account();
    expectOk(await post(`/v1/keys/${other.key.id}/revoke`, other.userToken, {}));
    expectStatus(await decide(other.key.secret, body), 401);
    expectStatus(await get("/v1/models", other.key.secret), 401);
  });
});

describe("Models", () => {
  it("Authentication rule 5: an unknown model name and a model the account may not use get the same 404", async () => {
    const stranger = await account();
    const theirs = await registerPrivateModel(stranger);
    const unknown = `conformance-private-${crypto.randomUUID().slice(0, 8)}`;
    const forbidden = await decide(owner.key.secret, { model: theirs, state: "s", questions: { q: noul } });
    const missing = await decide(owner.key.secret, { model: unknown, state: "s", questions: { q: noul } });
    expectStatus(forbidden, 404);
    expectStatus(missing, 404);
    expect(forbidden.text.replaceAll(theirs, "<model>")).toBe(missing.text.replaceAll(unknown, "<model>"));
    expect(forbidden.headers.get("content-type")).toBe(missing.headers.get("content-type"));
  });

  it("Endpoints: GET /v1/models lists the accessible model names and aliases: svc-shared, and a private model to its owner only", async () => {
    const mine = await registerPrivateModel(owner);
    const stranger = await account();
    const listedTo = async (who: Account) => {
      const reply = await get("/v1/models", who.key.secret);
      expectStatus(reply, 200);
      return [...walk(reply.body)].map(([, v]) => v).filter((v) => typeof v === "string");
    };
    const ownerSees = await listedTo(owner);
    const strangerSees = await listedTo(stranger);
    expect(ownerSees).toContain(SHARED);
    expect(ownerSees).toContain(mine);
    expect(strangerSees).toContain(SHARED);
    expect(strangerSees).not.toContain(mine);
  });

  it("Image / Model: runtime addresses and the names of runtime secrets are never returned", async () => {
    const reply = await get("/v1/models", owner.key.secret);
    expectStatus(reply, 200);
    for (const address of await runtimeAddresses()) expect(reply.text).not.toContain(address);
  });
});
