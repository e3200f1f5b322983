/**
 * Image models end to end on a real stack of their own (edge under workerd, Postgres, Redis, the
 * sidecar's training worker under Bun, the image runtime serving the ONNX backbone): drawings this
 * project makes (local/demo-images.ts) uploaded as assets, a model trained to "API ready" and a
 * forced rejection, image decisions with the owner's key and from a signed-in session, the saved-task
 * refusals, the unknown mass on images of none of the answers, and prepaid credit: reserved before
 * any GPU work, settled once, released on failure, never overdrawn by concurrent decisions, and
 * settled once when the sidecar dies right after it answered.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { creditFor, textTokensOf } from "../contract/credit.ts";
import { DecisionResponse, type ChoiceAnswer } from "../contract/decision.ts";
import { ImageModelList } from "../contract/image-models.ts";
import { LIMITS } from "../contract/limits.ts";
import { EvaluationReport, type Training } from "../contract/trainings.ts";
import { DEMO_QUESTION, DEMO_QUESTION_ID, demoImage, demoImages, type DemoImage } from "../local/demo-images.ts";
import { imageTrainingFile, trainImageModel, uploadImage, type LabelledImage } from "../local/image-api.ts";
import { startStack, type Stack } from "../local/stack.ts";
import { grantCredit } from "../ops/accounts.ts";
import { callJson, errorOf, owner as stackOwner, type Owner as StackOwner } from "./support/own-stack.ts";
import { RUNTIME_PATHS, Stats } from "../server-shared/runtime-protocol.ts";
import { Usage } from "../contract/usage.ts";

const dataDir = mkdtempSync(join(tmpdir(), "svc-image-models-"));
chmodSync(dataDir, 0o711);
let stack: Stack;
let db: pg.Client;

interface Owner extends StackOwner {
  accountId: string;
}

async function owner(login: string): Promise<Owner> {
  const signedIn = await stackOwner(stack, login);
  const { rows } = await db.query("SELECT id FROM accounts WHERE idp_subject = $1", [login]);
  return { ...signedIn, accountId: rows[0].id as string };
}

const call = (path: string, token: string, body?: unknown, base = stack.baseUrl) => callJson(base, path, token, body);

/** An asset created, uploaded and completed with `token`; its id. */
const upload = (png: Uint8Array, token: string, purpose: "prediction" | "training" = "prediction") => uploadImage(stack.baseUrl, token, png, purpose);

/** The demonstration question, as the model saved it. */
const QUESTIONS = { [DEMO_QUESTION_ID]: DEMO_QUESTION };

/** A training file over `images`, each uploaded as a training asset and labelled by `label` (by default its own). */
async function imageFile(account: Owner, images: DemoImage[]): Promise<string> {
  const labelled: LabelledImage[] = [];
  for (const image of images) labelled.push({ customId: `${image.kind}-${image.seed}`, assetId: await upload(image.png, account.key, "training"), label: image.label });
  return imageTrainingFile(labelled, QUESTIONS);
}

const train = (account: Owner, file: string) => trainImageModel(stack.baseUrl, account.userToken, file);

const decisionBody = (model: string, assetId: string, questions: unknown = QUESTIONS) => ({ model, state: "", images: [{ asset_id: assetId }], questions });

async function balance(account: Owner): Promise<{ balance: number; reserved: number }> {
  const reply = await call("/v1/image-credit", account.key);
  expect(reply.status).toBe(200);
  return { balance: reply.body.balance_micro_usd as number, reserved: reply.body.reserved_micro_usd as number };
}

/** Credit granted as the operator's command grants it (npm run account -- credit). */
async function grant(account: Owner, microUsd: number): Promise<void> {
  await grantCredit(db, account.accountId, { amountMicroUsd: microUsd, note: "test grant" });
}

/** Passes the image runtime has run (its own counters). */
async function imagePasses(): Promise<number> {
  const res = await fetch(`${stack.urls.imageRuntime}${RUNTIME_PATHS.stats}`, { headers: { authorization: `Bearer ${stack.secrets.imageRuntime}` } });
  return Stats.parse(await res.json()).passes;
}

/** The worst case a decision with QUESTIONS reserves, and what one that read 64 visual tokens is charged. */
const textTokens = textTokensOf(JSON.stringify({ state: "", questions: QUESTIONS }));
const WORST = creditFor(LIMITS.imageVisualTokens + textTokens);
const CHARGE = creditFor(64 + textTokens);

let alice: Owner;
let bob: Owner;
let model: string;
let done: Training;

beforeAll(async () => {
  stack = await startStack({ dataDir, log: () => {}, edgeVars: { IMAGE_API: "on", IMAGE_BROWSER: "on" } });
  db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  [alice, bob] = [await owner("alice-image-models"), await owner("bob-image-models")];
  done = await train(alice, await imageFile(alice, await demoImages(40)));
  model = done.model!;
  await grant(alice, 100 * WORST);
}, 420_000);

afterAll(async () => {
  await db?.end();
  await stack?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("an image model trained on the demonstration drawings", () => {
  it("ends API ready, accepted against chance, with its unknown detection in the report", async () => {
    expect(done.status, JSON.stringify(done)).toBe("ready");
    expect(model).toMatch(/^ft:svc-image:[0-9a-f]{32}$/);
    const [figures] = done.evaluation!.questions;
    expect(figures!.candidate).toBeGreaterThanOrEqual(figures!.zero_shot + 0.1);
    // Judged against chance, and every surface says so (an image backbone answers no question by itself).
    expect(done.evaluation!.baseline).toBe("chance");
    const report = EvaluationReport.parse((await call(done.evaluation!.report, alice.userToken)).body);
    expect(report.baseline).toBe("chance");
    const svg = await fetch(`${stack.baseUrl}${done.evaluation!.report}.svg`, { headers: { authorization: `Bearer ${alice.userToken}` } });
    expect(await svg.text()).toMatch(/, chance/);
    expect(report.method.kind).toBe("image_head");
    expect(report.method.features).toBe(1280);
    expect(report.questions[0]!.outcomes).toEqual(["circle", "square", null]);
    // k-fold: every example is held out once, answered by a head that never saw it.
    expect(report.questions[0]!.held_out_counts.reduce((a, b) => a + b, 0)).toBe(120);
    expect(report.questions[0]!.held_out_counts.every((n) => n >= LIMITS.trainingExamplesPerOutcome)).toBe(true);
    expect(report.questions[0]!.uncertainty!.difference.low).toBeGreaterThanOrEqual(0.1);
    expect(report.unknown!.held_out_other).toBe(report.questions[0]!.held_out_counts[2]);
    expect(report.unknown!.auroc).toBeGreaterThan(0.8);
    // Aggregates only: no example's image, custom_id or prediction is in it.
    const text = JSON.stringify(report);
    const { rows } = await db.query("SELECT e.custom_id, e.asset_id FROM training_examples e WHERE e.training_id = $1", [done.id]);
    expect(rows).toHaveLength(120);
    for (const row of rows) {
      expect(text).not.toContain(row.asset_id);
      expect(text).not.toContain(`"${row.custom_id}"`);
    }
  });

  it("is listed by GET /v1/image-models for its owner's session with its state and saved task, and for no one else", async () => {
    const listed = ImageModelList.parse((await call("/v1/image-models", alice.userToken)).body);
    expect(listed.data).toEqual([
      expect.objectContaining({ id: model, training: done.id, state: "api_ready", task: { question_id: DEMO_QUESTION_ID, question: DEMO_QUESTION, outcome_order: ["circle", "square"] } }),
    ]);
    expect(ImageModelList.parse((await call("/v1/image-models", bob.userToken)).body).data).toEqual([]);
    expect(errorOf(await call("/v1/image-models", alice.key))).toMatchObject({ code: "wrong_credential_kind" });
  });

  it("kept its training images while it ran and 30 days after: they no longer expire in 24 hours", async () => {
    const { rows } = await db.query("SELECT count(*)::int AS n FROM image_assets WHERE training_id = $1", [done.id]);
    expect(rows[0].n).toBe(120);
  });
});

describe("an image decision", () => {
  it("answers a new drawing with the owner's key: the answer, probabilities given a known answer, the unknown mass, and billing of 64 visual tokens plus the question once", async () => {
    const before = await balance(alice);
    const passes = await imagePasses();
    const asset = await upload(await demoImage("square", 901), alice.key);
    const reply = await call("/v1/systemone", alice.key, decisionBody(model, asset));
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const decision = DecisionResponse.parse(reply.body);
    expect(decision.model).toBe(model);
    const answer = decision.answers.get(DEMO_QUESTION_ID) as ChoiceAnswer;
    expect(answer.choice).toBe("square");
    expect([...answer.probabilities.keys()]).toEqual(["circle", "square"]);
    expect([...answer.probabilities.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    expect(answer.unknown_probability).toBeLessThan(0.5);
    expect(answer.confidence).toBeGreaterThan(0);
    expect(decision.usage).toEqual({ input_tokens: 64, output_tokens: 1, billable_input_tokens: 64 + textTokens });
    expect(await imagePasses()).toBe(passes + 1);
    expect(await balance(alice)).toEqual({ balance: before.balance - CHARGE, reserved: 0 });
    const { rows } = await db.query("SELECT status, amount_micro_usd::int AS amount, charged_micro_usd::int AS charged FROM credit_reservations WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1", [
      alice.accountId,
    ]);
    expect(rows[0]).toEqual({ status: "settled", amount: WORST, charged: CHARGE });
  });

  it("puts the unknown mass on drawings of none of the answers", async () => {
    const unknown = async (kind: "circle" | "triangle" | "cross" | "stripes", seed: number) => {
      const reply = await call("/v1/systemone", alice.key, decisionBody(model, await upload(await demoImage(kind, seed), alice.key)));
      expect(reply.status).toBe(200);
      return (DecisionResponse.parse(reply.body).answers.get(DEMO_QUESTION_ID) as ChoiceAnswer).unknown_probability!;
    };
    const known = [await unknown("circle", 950), await unknown("circle", 951)];
    const other = [await unknown("triangle", 950), await unknown("cross", 951), await unknown("stripes", 952)];
    expect(Math.min(...other)).toBeGreaterThan(Math.max(...known));
    expect(other.filter((p) => p > 0.5).length).toBeGreaterThanOrEqual(2);
  });

  it("answers from a signed-in session at POST /v1/image-decisions, which takes no API key", async () => {
    const asset = await upload(await demoImage("circle", 902), alice.userToken);
    const reply = await call("/v1/image-decisions", alice.userToken, decisionBody(model, asset));
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect((DecisionResponse.parse(reply.body).answers.get(DEMO_QUESTION_ID) as ChoiceAnswer).choice).toBe("circle");
    expect(errorOf(await call("/v1/image-decisions", alice.key, decisionBody(model, asset)))).toMatchObject({ code: "wrong_credential_kind" });
  });

  it("holds a session's image decisions to the account's per-second quota, as the API-key route does", async () => {
    const asset = await upload(await demoImage("square", 903), alice.userToken);
    await db.query("UPDATE accounts SET requests_per_second = 1 WHERE id = $1", [alice.accountId]);
    try {
      // Four at once: at most two are admitted, even across the boundary of a one-second window.
      const replies = await Promise.all([1, 2, 3, 4].map(() => call("/v1/image-decisions", alice.userToken, decisionBody(model, asset))));
      const refused = replies.filter((reply) => reply.status === 429);
      expect(refused.length, JSON.stringify(replies.map((reply) => reply.status))).toBeGreaterThanOrEqual(2);
      expect(errorOf(refused[0]!)).toMatchObject({ code: "rate_limited" });
    } finally {
      await db.query("UPDATE accounts SET requests_per_second = NULL WHERE id = $1", [alice.accountId]);
    }
  });

  it("refuses a question that is not the model's saved one (422 naming what differs), before any GPU work and with the credit given back", async () => {
    const asset = await upload(await demoImage("circle", 903), alice.key);
    const passes = await imagePasses();
    const before = await balance(alice);
    const refused = async (questions: unknown, code: string, message: RegExp) => {
      const reply = await call("/v1/systemone", alice.key, decisionBody(model, asset, questions));
      expect(reply.status, JSON.stringify(reply.body)).toBe(422);
      expect(errorOf(reply)).toMatchObject({ code, message: expect.stringMatching(message) });
    };
    const reversed = { ...DEMO_QUESTION, criteria: { square: DEMO_QUESTION.criteria.square, circle: DEMO_QUESTION.criteria.circle } };
    await refused({ [DEMO_QUESTION_ID]: reversed }, "task_mismatch", /outcome order \["circle","square"\]/);
    await refused({ figure: DEMO_QUESTION }, "task_mismatch", /question id is "figure"/);
    await refused({ [DEMO_QUESTION_ID]: { ...DEMO_QUESTION, criteria: { circle: null, triangle: null } } }, "task_mismatch", /answers are \["circle","triangle"\]/);
    await refused({ [DEMO_QUESTION_ID]: { ...DEMO_QUESTION, instructions: "Which colour?" } }, "task_mismatch", /instructions or an answer's description differ/);
    await refused({ [DEMO_QUESTION_ID]: DEMO_QUESTION, also: { type: "noul" } }, "invalid_request", /exactly one question/);
    await refused({ [DEMO_QUESTION_ID]: { type: "noul" } }, "invalid_request", /choice question, not noul/);
    expect(await imagePasses()).toBe(passes);
    expect(await balance(alice)).toEqual(before);
  });

  it("takes only a finalized asset's id: a URL or an encoded image is 422, another account's asset and an unknown id the same 404", async () => {
    const url = await call("/v1/systemone", alice.key, decisionBody(model, "https://example.com/a.png"));
    expect(url.status).toBe(422);
    expect(errorOf(url).message).toMatch(/URLs and encoded images are not accepted/);
    const encoded = await call("/v1/systemone", alice.key, decisionBody(model, "data:image/png;base64,iVBORw0KGgo="));
    expect(encoded.status).toBe(422);
    const bobs = await upload(await demoImage("circle", 904), bob.key);
    const other = await call("/v1/systemone", alice.key, decisionBody(model, bobs));
    const unknown = await call("/v1/systemone", alice.key, decisionBody(model, crypto.randomUUID()));
    expect(other.status).toBe(404);
    expect(other.body).toEqual(unknown.body);
  });

  it("answers another account's key naming the model the same 404 as an unknown model", async () => {
    await grant(bob, WORST);
    const asset = await upload(await demoImage("circle", 905), bob.key);
    const theirs = await call("/v1/systemone", bob.key, decisionBody(model, asset));
    const none = await call("/v1/systemone", bob.key, decisionBody("ft:svc-image:00000000000000000000000000000000", asset));
    expect(theirs.status).toBe(404);
    expect(errorOf(theirs)).toEqual(errorOf(none));
  });

  it("answers 404 for the backbone itself or a text model named in an image decision, and for an image model named in a text decision, saying why", async () => {
    const asset = await upload(await demoImage("circle", 906), alice.key);
    const backbone = await call("/v1/systemone", alice.key, decisionBody("svc-image", asset));
    expect(backbone.status).toBe(404);
    expect(errorOf(backbone)).toMatchObject({ code: "model_not_found", message: expect.stringMatching(/image backbone/) });
    expect(errorOf(await call("/v1/systemone", alice.key, decisionBody("svc-shared", asset)))).toMatchObject({ code: "model_not_found", message: expect.stringMatching(/reads text/) });
    const text = await call("/v1/systemone", alice.key, { model, state: "a circle", questions: QUESTIONS });
    expect(text.status).toBe(404);
    expect(errorOf(text).message).toMatch(/reads images/);
  });
});

describe("prepaid credit", () => {
  it("refuses with 402 insufficient_credit before any GPU work when the worst case is not covered", async () => {
    const asset = await upload(await demoImage("circle", 907), alice.key);
    const { balance: left } = await balance(alice);
    await db.query("UPDATE credit_balances SET balance_micro_usd = $2 WHERE account_id = $1", [alice.accountId, WORST - 1]);
    try {
      const passes = await imagePasses();
      const refused = await call("/v1/systemone", alice.key, decisionBody(model, asset));
      expect(refused.status).toBe(402);
      expect(errorOf(refused)).toMatchObject({ code: "insufficient_credit", message: expect.stringContaining(`is ${WORST - 1} micro-USD`) });
      expect(await imagePasses()).toBe(passes);
      expect(await balance(alice)).toEqual({ balance: WORST - 1, reserved: 0 });
      const { rows } = await db.query("SELECT count(*)::int AS n FROM credit_reservations WHERE account_id = $1 AND status = 'reserved'", [alice.accountId]);
      expect(rows[0].n).toBe(0);
    } finally {
      await db.query("UPDATE credit_balances SET balance_micro_usd = $2 WHERE account_id = $1", [alice.accountId, left]);
    }
  });

  it("never overdraws under many decisions at once: each reserves its worst case, the rest are 402 (or 529 from a full lane), every success settles once", async () => {
    const { balance: start } = await balance(alice);
    await db.query("UPDATE credit_balances SET balance_micro_usd = $2 WHERE account_id = $1", [alice.accountId, 3 * WORST]);
    const assets = await Promise.all(Array.from({ length: 12 }, async (_, i) => upload(await demoImage("square", 920 + i), alice.key)));
    const replies = await Promise.all(assets.map((asset) => call("/v1/systemone", alice.key, decisionBody(model, asset))));
    const statuses = replies.map((r) => r.status);
    expect(statuses.every((s) => s === 200 || s === 402 || s === 529), statuses.join(",")).toBe(true);
    const ok = statuses.filter((s) => s === 200).length;
    // At most three worst cases fit at once: with twelve at once, some must have been refused.
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 402).length).toBeGreaterThan(0);
    expect(await balance(alice)).toEqual({ balance: 3 * WORST - ok * CHARGE, reserved: 0 });
    await db.query("UPDATE credit_balances SET balance_micro_usd = $2 WHERE account_id = $1", [alice.accountId, start]);
  });

  it("releases the reservation on failure: 413 when the runtime takes fewer visual tokens than the image needs, 503 when the runtime is down", async () => {
    const asset = await upload(await demoImage("circle", 940), alice.key);
    const before = await balance(alice);
    try {
      await stack.restoreImageRuntime({ RUNTIME_MAX_VISUAL_TOKENS: "32" });
      const tooLarge = await call("/v1/systemone", alice.key, decisionBody(model, asset));
      expect(tooLarge.status, JSON.stringify(tooLarge.body)).toBe(413);
      expect(errorOf(tooLarge)).toMatchObject({ code: "context_too_large", message: expect.stringContaining("64 visual tokens") });
      expect(await balance(alice)).toEqual(before);

      await stack.crashImageRuntime();
      const down = await call("/v1/systemone", alice.key, decisionBody(model, asset));
      expect(down.status).toBe(503);
      expect(await balance(alice)).toEqual(before);
    } finally {
      await stack.restoreImageRuntime();
    }
    expect((await call("/v1/systemone", alice.key, decisionBody(model, asset))).status).toBe(200);
  });

  it("settles exactly once when the sidecar dies right after it answered", async () => {
    const asset = await upload(await demoImage("circle", 941), alice.key);
    const before = await balance(alice);
    try {
      await stack.restartSidecar("SIGTERM", { SVC_TEST_CRASH_AFTER_IMAGE_ANSWER: "on" });
      const reply = await call("/v1/systemone", alice.key, decisionBody(model, asset));
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await balance(alice)).toEqual({ balance: before.balance - CHARGE, reserved: 0 });
    } finally {
      await stack.restartSidecar("SIGKILL");
    }
    const { rows } = await db.query("SELECT count(*)::int AS n FROM credit_reservations WHERE account_id = $1 AND status = 'reserved'", [alice.accountId]);
    expect(rows[0].n).toBe(0);
    expect(await balance(alice)).toEqual({ balance: before.balance - CHARGE, reserved: 0 });
  });

  it("is not touched by text decisions: they are not charged", async () => {
    const before = await balance(alice);
    const text = await call("/v1/systemone", alice.key, { model: "svc-shared", state: "a circle", questions: { q: { type: "noul", instructions: "Is it round?" } } });
    expect(text.status, JSON.stringify(text.body)).toBe(200);
    expect(await balance(alice)).toEqual(before);
  });

  it("is counted by GET /v1/usage as charged: each decision for its key (a session's under none), the credit spent beside the tokens", async () => {
    type Buckets = Map<string | null, { requests: number; image_credit_micro_usd: number }>;
    const perKey = async (): Promise<Buckets> => new Map(Usage.parse((await call("/v1/usage?group_by=key", alice.userToken)).body).data.map((b) => [b.key_id, b]));
    const counted = (buckets: Buckets, key: string | null) => buckets.get(key) ?? { requests: 0, image_credit_micro_usd: 0 };
    const keyId = alice.key.split("_")[1]!; // a key's secret is svc_<id>_<material>
    const before = await perKey();
    const credit = await balance(alice);
    const asset = await upload(await demoImage("circle", 30_001), alice.key);
    for (const token of [alice.key, alice.key, alice.userToken]) {
      const reply = await call(token === alice.key ? "/v1/systemone" : "/v1/image-decisions", token, decisionBody(model, asset));
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    }
    const spent = credit.balance - (await balance(alice)).balance;
    expect(spent).toBe(3 * CHARGE);
    // Usage rows land just after the answers.
    let after = await perKey();
    for (let tries = 0; tries < 50 && counted(after, keyId).requests + counted(after, null).requests < counted(before, keyId).requests + counted(before, null).requests + 3; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      after = await perKey();
    }
    expect(counted(after, keyId).requests - counted(before, keyId).requests).toBe(2);
    expect(counted(after, keyId).image_credit_micro_usd - counted(before, keyId).image_credit_micro_usd).toBe(2 * CHARGE);
    expect(counted(after, null).requests - counted(before, null).requests).toBe(1);
    expect(counted(after, null).image_credit_micro_usd - counted(before, null).image_credit_micro_usd).toBe(CHARGE);
  });

  it("is shown by GET /v1/image-credit with the published price, to either credential", async () => {
    const reply = await call("/v1/image-credit", alice.userToken);
    expect(reply.body).toMatchObject({ object: "credit_balance", pricing: { currency: "USD", micro_usd_per_billable_token: 2 } });
  });
});

describe("a rejected image model", () => {
  it("is saved with its report, listed as rejected with no id, and never served", async () => {
    // Every drawing twice (two assets of the same picture) with two different labels: no head
    // answers such examples better than chance, and one that learns a picture's label in one fold is
    // wrong on its twin in another. Whatever the folds, it cannot beat chance with confidence.
    const answers = ["circle", "square", null];
    const labelled: LabelledImage[] = [];
    for (const [i, image] of (await demoImages(6, 500)).entries()) {
      for (const twin of [0, 1]) {
        labelled.push({ customId: `twin-${i}-${twin}`, assetId: await upload(image.png, alice.key, "training"), label: answers[(i + twin) % 3]! });
      }
    }
    const rejected = await train(alice, imageTrainingFile(labelled, QUESTIONS));
    expect(rejected.status, JSON.stringify(rejected)).toBe("rejected");
    expect(rejected.model).toBeNull();
    const report = EvaluationReport.parse((await call(rejected.evaluation!.report, alice.userToken)).body);
    expect(report.decision).toBe("rejected");
    expect(report.questions[0]!.reason).toMatch(/does not beat chance/);
    const listed = ImageModelList.parse((await call("/v1/image-models", alice.userToken)).body);
    expect(listed.data.find((m) => m.training === rejected.id)).toMatchObject({ id: null, state: "rejected" });
  }, 300_000);
});

describe("with the image flags off", () => {
  it("has no image model routes: 404 as for a route that does not exist, and decisions with images are 422", async () => {
    const { baseUrl } = await stack.addEdge("miniflare", { IMAGE_API: "off", IMAGE_BROWSER: "off" });
    for (const path of ["/v1/image-models", "/v1/image-credit"]) expect((await call(path, alice.userToken, undefined, baseUrl)).status).toBe(404);
    expect((await call("/v1/image-decisions", alice.userToken, decisionBody(model, crypto.randomUUID()), baseUrl)).status).toBe(404);
    const reply = await call("/v1/systemone", alice.key, decisionBody(model, crypto.randomUUID()), baseUrl);
    expect(reply.status).toBe(422);
    expect(errorOf(reply).message).toMatch(/not enabled/);
  });

  it("with only the API flag on, keeps the session routes absent and takes decisions with a key", async () => {
    const { baseUrl } = await stack.addEdge("miniflare", { IMAGE_API: "on", IMAGE_BROWSER: "off" });
    expect((await call("/v1/image-models", alice.userToken, undefined, baseUrl)).status).toBe(404);
    const asset = await upload(await demoImage("circle", 960), alice.key);
    expect((await call("/v1/systemone", alice.key, decisionBody(model, asset), baseUrl)).status).toBe(200);
  });
});
