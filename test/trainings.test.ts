/**
 * Customer training on the real stack (edge under workerd, Postgres, the sidecar's training worker
 * under Bun, the runtime with the default model): a small job end to end through to served answers,
 * a forced rejection, and who may see and use what.
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { DecisionResponse } from "../contract/decision.ts";
import { ModelList } from "../contract/models.ts";
import { validateTrainingFile } from "../contract/training-file.ts";
import { EvaluationReport, Training, TrainingList } from "../contract/trainings.ts";
import type { TrainedHeads } from "../server-shared/trained.ts";
import { LIMITS } from "../contract/limits.ts";
import { call, newAccount, query } from "./support/api.ts";
import { expectError } from "./support/security.ts";
import { heldSubmitted, lines, poll, results, submitted } from "./support/bulk.ts";
import { animalSentences, noulFile, pollTraining, submitTraining, withModel, type Account } from "./support/training.ts";

/** A question the shared model cannot answer from its words: what "group A" is, only the examples say. */
const GROUP_A = { type: "noul", instructions: "Does this sentence belong to group A?" };

const decide = (account: Account, model: string, state: string, questions: Record<string, unknown> = { q: GROUP_A }) =>
  call<DecisionResponse>("/v1/systemone", { token: account.key.secret, body: { model, state, questions } });

describe("a training accepted, activated and served", () => {
  let owner: Account;
  let other: Account;
  let done: Training;
  /** The current held-out figures the status showed while examples were read. */
  const interim: NonNullable<NonNullable<Training["progress"]>["held_out"]>[] = [];

  beforeAll(async () => {
    [owner, other] = await Promise.all([newAccount(), newAccount()]);
    const training = await submitTraining(owner, await noulFile(GROUP_A, animalSentences()));
    expect(training.status).toBe("queued");
    done = await pollTraining(owner, training.id, (t) => {
      if (t.progress?.held_out) interim.push(t.progress.held_out);
      return t.finished_at !== null;
    });
  }, 180_000);

  it("showed current cross-validated figures while it read its examples, measured at each quarter", () => {
    expect(interim.length).toBeGreaterThan(0);
    for (const figures of interim) {
      expect([12, 24, 36]).toContain(figures.examples_read);
      // Every example read is held out once (k-fold), and the heads are fitted on all of them.
      expect(figures).toMatchObject({ training: figures.examples_read, held_out: figures.examples_read });
      expect(figures.questions).toEqual([{ question: "q", metric: "auroc", candidate: expect.any(Number), zero_shot: expect.any(Number), ece: expect.any(Number) }]);
    }
  });

  it("ends ready, with the trained model's id, its cross-validated figures beside the zero-shot ones with their intervals, and its report", async () => {
    expect(done.status, JSON.stringify(done)).toBe("ready");
    expect(done.model).toMatch(/^ft:svc-shared:[0-9a-f]{32}$/);
    expect(done.examples).toEqual({ total: 48, held_out: 48 });
    expect(done.evaluation?.decision).toBe("accepted");
    expect(done.evaluation?.baseline).toBe("zero_shot");
    const [figures] = done.evaluation!.questions;
    expect(figures!.metric).toBe("auroc");
    expect(figures!.candidate).toBeGreaterThanOrEqual(figures!.zero_shot + 0.02);
    expect(figures!.passed).toBe(true);
    expect(done.data_expires_at).not.toBeNull();

    const report = await call(done.evaluation!.report, { token: owner.userToken });
    expect(report.status).toBe(200);
    const parsed = EvaluationReport.parse(report.body);
    expect(parsed.model).toBe(done.model);
    expect(parsed.baseline).toBe("zero_shot");
    expect(parsed.examples).toEqual({ training: 48, held_out: 48 });
    expect(parsed.acceptance).toMatchObject({ margin: 0.02, max_ece: 0.1, confidence: 0.95, folds: 5 });
    const [question] = parsed.questions;
    expect(question!.held_out_counts).toEqual([24, 24]);
    // Accepted with confidence: the difference's interval lies above the margin, and holds the estimate.
    const { difference, candidate_primary, zero_shot_primary } = question!.uncertainty!;
    expect(difference.low).toBeGreaterThanOrEqual(0.02);
    expect(difference.low).toBeLessThanOrEqual(difference.estimate);
    expect(candidate_primary.low).toBeLessThanOrEqual(question!.candidate.primary);
    expect(zero_shot_primary.high).toBeGreaterThanOrEqual(question!.zero_shot.primary);
    expect(parsed.advice).toBeNull();
    expect(parsed.learning_curve!.map((p) => p.examples)).toEqual([12, 24, 36, 48]);
    // Every example's label audited (the out-of-fold answers; no pass more): labels this clean leave few, if any, suspected.
    expect(parsed.label_audit).toMatchObject({ method: "confident_learning", examples: 48, has_more: false });
    expect(parsed.label_audit!.retrained).toBeUndefined();
    expect(parsed.label_audit!.suspected).toBeLessThanOrEqual(4);
    expect(parsed.method.inputs).toEqual([expect.arrayContaining([expect.stringMatching(/^(answer_state|pooled_state|label_logprobs|sentence_embedding)$/)])]);
    const svg = await fetch(`${(await import("./support/api.ts")).stack().baseUrl}${done.evaluation!.report}.svg`, { headers: { authorization: `Bearer ${owner.userToken}` } });
    expect(svg.headers.get("content-type")).toContain("image/svg+xml");
    // A diagram opened on its own is a document: it brings a policy that loads and runs nothing.
    expect(svg.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    const drawn = await svg.text();
    expect(drawn).toContain("<svg");
    expect(drawn).toMatch(/, zero-shot/);
  });

  it("embedded every example's state with the runtime's sentence encoder, and a head that reads the embedding names that encoder", async () => {
    const rows = await query<{ width: number; encoder: string }>("SELECT array_length(embedding, 1) AS width, encoder FROM training_examples WHERE training_id = $1", [done.id]);
    expect(rows).toHaveLength(48);
    expect(new Set(rows.map((r) => `${r.width}:${r.encoder}`))).toEqual(new Set([`384:${rows[0]!.encoder}`]));
    expect(rows[0]!.encoder).toMatch(/^[0-9a-f]{64}$/);
    const [release] = await query<{ head: TrainedHeads }>("SELECT head FROM model_releases WHERE id = $1", [done.model]);
    const [head] = release!.head.questions;
    expect(head!.encoder).toBe(head!.inputs!.includes("sentence_embedding") ? rows[0]!.encoder : undefined);
  });

  it("is registered as an immutable release owned by the account, on the base's runtime", async () => {
    const [row] = await query<{ owners: string[]; base_release: string; sidecar_url: string | null }>(
      "SELECT owners, base_release, sidecar_url FROM model_releases WHERE id = $1",
      [done.model],
    );
    expect(row!.owners).toEqual([owner.accountId]);
    expect(row!.sidecar_url).not.toBeNull();
    await expect(query("UPDATE model_releases SET head = '{}' WHERE id = $1", [done.model])).rejects.toThrow(/immutable/);
  });

  it("answers the owner's real-time decisions with the shared model's wire shape, far better than zero-shot", async () => {
    const yes = await decide(owner, done.model!, "A donkey was grazing beside the road.");
    const no = await decide(owner, done.model!, "A taxi was waiting beside the road.");
    expect(yes.status, JSON.stringify(yes.body)).toBe(200);
    const answer = DecisionResponse.parse(yes.body);
    expect(answer.model).toBe(done.model);
    expect(answer.usage.input_tokens).toBeGreaterThan(0);
    expect(answer.usage.output_tokens).toBe(1);
    const p = (r: typeof yes) => (r.body.answers as unknown as Record<string, { noul: number }>).q!.noul;
    expect(p(yes)).toBeGreaterThan(0.5);
    expect(p(no)).toBeLessThan(0.5);
  });

  it("refuses any other question set with 422 task_mismatch saying what differs", async () => {
    const other = await decide(owner, done.model!, "A cat.", { q: { ...GROUP_A, instructions: "Something else?" } });
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ error: { code: "task_mismatch" } });
    expect(JSON.stringify(other.body)).toContain('question \\"q\\"');
    const renamed = await decide(owner, done.model!, "A cat.", { r: GROUP_A });
    expect(renamed.status).toBe(422);
    expect(JSON.stringify(renamed.body)).toContain("question ids");
  });

  it("is in the owner's model listing with its evaluation report, and works in bulk", async () => {
    const listing = ModelList.parse((await call("/v1/models", { token: owner.key.secret })).body);
    const mine = listing.models.find((m) => m.name === done.model);
    expect(mine?.evaluation).toBe(`/v1/models/${encodeURIComponent(done.model!)}/evaluation`);
    const evaluation = await call(mine!.evaluation!, { token: owner.key.secret });
    expect(EvaluationReport.parse(evaluation.body).training).toBe(done.id);

    const id = await submitted(owner, lines([{ custom_id: "b1", body: { model: done.model, state: "A goat on the hill.", questions: { q: GROUP_A } } }]));
    const batch = await poll(owner, id);
    expect(batch.status).toBe("completed");
    const [record] = await results(owner, id);
    expect(record && "response" in record ? record.response.model : record).toBe(done.model);
  });

  it("is invisible to every other account: listings, decisions, reports and the job answer 404", async () => {
    const listing = ModelList.parse((await call("/v1/models", { token: other.key.secret })).body);
    expect(listing.models.map((m) => m.name)).not.toContain(done.model);
    const decision = await decide(other, done.model!, "A cat.");
    expect(decision.status).toBe(404);
    expect(decision.body).toMatchObject({ error: { code: "model_not_found" } });
    for (const path of [`/v1/trainings/${done.id}`, `/v1/trainings/${done.id}/report`, `/v1/trainings/${done.id}/report.svg`]) {
      const reply = await call(path, { token: other.userToken });
      expect(reply.status, path).toBe(404);
    }
    for (const path of [`/v1/trainings/${done.id}/submit`, `/v1/trainings/${done.id}/cancel`]) {
      expect((await call(path, { token: other.userToken, body: {} })).status, path).toBe(404);
    }
    expect((await call(`/v1/models/${done.model}/evaluation`, { token: other.key.secret })).status).toBe(404);
    expect((await call(`/v1/models/${done.model}/retire`, { token: other.userToken, body: {} })).status).toBe(404);
    const list = TrainingList.parse((await call("/v1/trainings", { token: other.userToken })).body);
    expect(list.data.map((t) => t.id)).not.toContain(done.id);
  });

  it("refuses an API key on every training route, as key management does", async () => {
    for (const [path, body] of [["/v1/trainings", undefined], ["/v1/trainings", { idempotency_key: "k", input_bytes: 100 }], [`/v1/trainings/${done.id}`, undefined], [`/v1/models/${done.model}/retire`, {}]] as const) {
      const reply = await call(path, { token: owner.key.secret, body });
      expect(reply.status, path).toBe(401);
      expect(reply.body).toMatchObject({ error: { code: "wrong_credential_kind" } });
    }
  });

  it("can be retired by its owner: new requests answer 404; a batch that froze it completes with error records", async () => {
    // Submitted (its models frozen) before the retirement, held so that no worker runs it first.
    const example = { body: { model: done.model, state: "A goat on the hill.", questions: { q: GROUP_A } } };
    const frozen = await heldSubmitted(owner, lines([{ custom_id: "r1", ...example }, { custom_id: "r2", ...example }]));
    const retired = await call(`/v1/models/${done.model}/retire`, { token: owner.userToken, body: {} });
    expect(retired.status).toBe(200);
    expect(retired.body).toEqual({ id: done.model, object: "model", retired: true });
    expect((await decide(owner, done.model!, "A cat.")).status).toBe(404);
    const listing = ModelList.parse((await call("/v1/models", { token: owner.key.secret })).body);
    expect(listing.models.map((m) => m.name)).not.toContain(done.model);
    expect((await call(`/v1/models/${done.model}/retire`, { token: owner.userToken, body: {} })).status).toBe(404);

    await frozen.release();
    const batch = await poll(owner, frozen.id);
    expect(batch).toMatchObject({ status: "completed", request_counts: { total: 2, completed: 0, failed: 2 } });
    for (const record of await results(owner, frozen.id)) {
      expect(record).toMatchObject({ error: { status: 404, code: "model_not_found", message: expect.stringContaining("was retired after this batch was submitted") } });
    }
  });
});

describe("a training with some labels wrong", () => {
  it("lists the examples whose label looks wrong first, with the answer the model prefers, in the report and page by page; trains again without them when asked", async () => {
    const owner = await newAccount();
    // Two animals labelled vehicles and two vehicles labelled animals, among 48 sentences.
    const sentences = animalSentences();
    const wrong = new Set([sentences[0]!.text, sentences[5]!.text, sentences[14]!.text, sentences[20]!.text]);
    const file = await noulFile(GROUP_A, sentences, (s) => (wrong.has(s.text) ? !s.animal : s.animal));
    const flipped = new Map(
      file
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as { custom_id: string; body: { state: string }; labels: { q: boolean } })
        .filter((e) => wrong.has(e.body.state))
        .map((e) => [e.custom_id, e.labels.q]),
    );
    expect(flipped.size).toBe(4);
    const training = await submitTraining(owner, file, undefined, { exclude_suspected_labels: true });
    const done = await pollTraining(owner, training.id);
    expect(["ready", "rejected"]).toContain(done.status);

    const report = EvaluationReport.parse((await call(`/v1/trainings/${done.id}/report`, { token: owner.userToken })).body);
    const audit = report.label_audit!;
    expect(audit).toMatchObject({ method: "confident_learning", examples: 48 });
    // The wrong labels rank first: at least three of the four among the first four issues, each with
    // the label it was given and the one the model prefers (the true one), their probabilities in order.
    const top = audit.issues.slice(0, 4);
    expect(top.filter((issue) => flipped.has(issue.custom_id)).length).toBeGreaterThanOrEqual(3);
    for (const issue of audit.issues.filter((i) => flipped.has(i.custom_id))) {
      expect(issue).toMatchObject({ question: "q", given: flipped.get(issue.custom_id), preferred: !flipped.get(issue.custom_id) });
      expect(issue.preferred_probability).toBeGreaterThan(issue.given_probability);
    }
    for (let i = 1; i < audit.issues.length; i++) expect(audit.issues[i]!.given_probability).toBeGreaterThanOrEqual(audit.issues[i - 1]!.given_probability);

    // Page by page, in the report's order.
    const page = async (query: string) => call<{ data: { rank: number; custom_id: string }[]; has_more: boolean }>(`/v1/trainings/${done.id}/label_issues${query}`, { token: owner.userToken });
    const first = await page("?limit=2");
    expect(first.status).toBe(200);
    expect(first.body.data.map((x) => x.rank)).toEqual([1, 2]);
    expect(first.body.has_more).toBe(audit.suspected > 2);
    const rest = await page(`?limit=100&after=2`);
    expect([...first.body.data, ...rest.body.data].map((x) => x.custom_id)).toEqual(audit.issues.map((x) => x.custom_id));
    expect(rest.body.has_more).toBe(false);
    expect((await page(`?after=${audit.suspected}`)).body).toEqual({ object: "list", data: [], has_more: false });
    expectError(await page("?limit=0"), 422, "invalid_request");
    expectError(await page("?after=-1"), 422, "invalid_request");
    // Asked to, it trained again without every example with an issue, and says which candidate it kept;
    // the report's figures and model are that candidate's.
    const retrained = audit.retrained!;
    expect(retrained.excluded).toBe(new Set(audit.issues.map((i) => i.custom_id)).size);
    expect(retrained.reason.length).toBeGreaterThan(0);
    expect(report.examples.training).toBe(retrained.kept === "without_suspected" ? 48 - retrained.excluded : 48);
    // A training that did not ask has no second candidate (the accepted training above).

    // Another account's training answers as no training at all.
    const other = await newAccount();
    expectError(await call(`/v1/trainings/${done.id}/label_issues`, { token: other.userToken }), 404, "not_found");
  }, 180_000);
});

describe("a training rejected", () => {
  it("keeps its report, registers no release, and no route can serve or activate it", async () => {
    const owner = await newAccount();
    // Every sentence twice, labelled true once and false once: no model answers such examples better
    // than chance, the base included, and a head that memorises a sentence's label in one fold is
    // wrong on its twin in another. Whatever the folds, it cannot beat the base with confidence.
    const once = animalSentences().slice(0, 24);
    const file = once
      .flatMap((s, i) => [true, false].map((label) => JSON.stringify({ custom_id: `twin-${i}-${label}`, body: { state: s.text, questions: { q: GROUP_A } }, labels: { q: label } })))
      .join("\n") + "\n";
    const training = await submitTraining(owner, file);
    const done = await pollTraining(owner, training.id);
    expect(done.status, JSON.stringify(done)).toBe("rejected");
    expect(done.model).toBeNull();
    expect(done.evaluation?.decision).toBe("rejected");
    const report = EvaluationReport.parse((await call(`/v1/trainings/${done.id}/report`, { token: owner.userToken })).body);
    expect(report.decision).toBe("rejected");
    expect(report.questions[0]!.reason).toMatch(/^cross-validated AUROC [-+]0\.\d+ over the base's \(at least -?0\.\d+ with 95 % confidence\) does not beat it by 0\.02 with that confidence$/);
    expect(report.questions[0]!.uncertainty!.difference.low).toBeLessThan(0.02);
    // It says what to do: labels that contradict each other look like a flat curve.
    expect(report.advice).toMatch(/more examples|check that the labels are consistent/);
    expect(await query("SELECT id FROM model_releases WHERE training_id = $1", [done.id])).toEqual([]);
    // The id it would have had answers as no model at all.
    const wouldBe = `ft:svc-shared:${done.id.replace(/-/g, "")}`;
    expect((await decide(owner, wouldBe, "A cat.", { q: GROUP_A })).status).toBe(404);
    expect((await call(`/v1/models/${wouldBe}/retire`, { token: owner.userToken, body: {} })).status).toBe(404);
    // Resubmitting or cancelling a finished training changes nothing.
    expect((await call(`/v1/trainings/${done.id}/submit`, { token: owner.userToken, body: {} })).body).toMatchObject({ status: "rejected" });
    expect((await call(`/v1/trainings/${done.id}/cancel`, { token: owner.userToken, body: {} })).body).toMatchObject({ status: "rejected" });
  }, 180_000);
});

describe("a training cancelled mid-job", () => {
  it("stops reading examples, registers nothing, and stays cancelled", async () => {
    const owner = await newAccount();
    const training = await submitTraining(owner, await noulFile(GROUP_A, animalSentences()));
    const running = await pollTraining(owner, training.id, (t) => (t.progress?.examples_read ?? 0) >= 3 || t.finished_at !== null);
    expect(running.status).toBe("running");
    expect(running.progress!.step).toMatch(/^reading examples through the base model \(\d+ of 48\)$/);
    const cancelled = Training.parse((await call(`/v1/trainings/${training.id}/cancel`, { token: owner.userToken, body: {} })).body);
    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.progress).toBeNull();
    const [{ read }] = (await query<{ read: number }>("SELECT examples_read AS read FROM trainings WHERE id = $1", [training.id])) as [{ read: number }];
    // An example in flight when the job was cancelled commits nothing: the fence refuses it.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const after = await query<{ read: number; status: string }>("SELECT examples_read AS read, status FROM trainings WHERE id = $1", [training.id]);
    expect(after[0]).toEqual({ read, status: "cancelled" });
    expect(await query("SELECT id FROM model_releases WHERE training_id = $1", [training.id])).toEqual([]);
    expect((await call(`/v1/trainings/${training.id}/submit`, { token: owner.userToken, body: {} })).body).toMatchObject({ status: "cancelled" });
  }, 120_000);
});

describe("hostile training files", () => {
  /** A valid file's lines, one of them replaced by a generated hostile line. */
  const hostileFile = async (seed: number): Promise<string> => {
    const lines = (await noulFile(GROUP_A, animalSentences())).trimEnd().split("\n");
    const [at, replacement] = fc.sample(
      fc.tuple(
        fc.integer({ min: 0, max: lines.length - 1 }),
        fc.oneof(
          fc.constant('{"custom_id": "x", "body": {"state": "a\\u0000b", "questions": {"q": {"type": "noul"}}}, "labels": {"q": true}}'),
          fc.constant(`{"custom_id": "${JSON.parse(lines[0]!).custom_id}", "body": {"state": "dup", "questions": {"q": ${JSON.stringify(GROUP_A)}}}, "labels": {"q": true}}`),
          fc.constant(`{"custom_id": "p", "body": {"state": "s", "questions": {"__proto__": ${JSON.stringify(GROUP_A)}}}, "labels": {"__proto__": true}}`),
          fc.constant(`{"custom_id": "c", "body": {"state": "s", "questions": {"q": ${JSON.stringify(GROUP_A)}}}, "labels": {"q": "yes"}}`),
          fc.constant(`{"custom_id": "d", "body": {"state": ${"[".repeat(40)}${"]".repeat(40)}, "questions": {"q": ${JSON.stringify(GROUP_A)}}}, "labels": {"q": true}}`),
          fc.json().map((j) => j),
          fc.string({ maxLength: 40 }),
          fc.record({ custom_id: fc.string({ maxLength: 20 }), body: fc.jsonValue({ maxDepth: 3 }), labels: fc.jsonValue({ maxDepth: 2 }) }).map((l) => JSON.stringify(l)),
        ),
      ),
      { numRuns: 1, seed },
    )[0]!;
    lines[at] = replacement;
    return lines.join("\n") + "\n";
  };

  it("fails each job naming the first bad line, as the shared validator does, and trains nothing", async () => {
    const owner = await newAccount();
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const file = await hostileFile(seed);
      const expected = validateTrainingFile(new TextEncoder().encode(file));
      const training = await submitTraining(owner, file);
      const done = await pollTraining(owner, training.id, (t) => t.finished_at !== null, 60_000);
      if (expected.ok) {
        // A generated line that happens to be a valid example: the job runs (cancelled here to save time).
        await call(`/v1/trainings/${training.id}/cancel`, { token: owner.userToken, body: {} });
        continue;
      }
      expect(done.status, `seed ${seed}`).toBe("failed");
      expect(done.error, `seed ${seed}`).toEqual(expected.error);
      expect(await query("SELECT 1 FROM training_examples WHERE training_id = $1", [training.id])).toEqual([]);
      expect(await query("SELECT 1 FROM model_releases WHERE training_id = $1", [training.id])).toEqual([]);
    }
  }, 180_000);

  it("fails a file whose examples name another base than the training's", async () => {
    const owner = await newAccount();
    const otherBase = withModel(await noulFile(GROUP_A, animalSentences()), "some-other-model");
    const first = await pollTraining(owner, (await submitTraining(owner, otherBase)).id, (t) => t.finished_at !== null, 60_000);
    expect(first).toMatchObject({ status: "failed", error: { code: "task_mismatch", line: 1 } });
    expect(first.error!.message).toContain('"some-other-model"');
  }, 120_000);
});

describe("a training's metadata and the status filter", () => {
  it("keeps the caller's pairs given at create, and lists by status", async () => {
    const account = await newAccount();
    const made = await call("/v1/trainings", { token: account.userToken, body: { idempotency_key: "meta", input_bytes: 100, metadata: { project: "triage" } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const training = Training.parse(made.body);
    expect(training.metadata).toEqual({ project: "triage" });
    const listed = async (status: string) => TrainingList.parse((await call(`/v1/trainings?status=${status}`, { token: account.userToken })).body).data.map((t) => [t.id, t.metadata]);
    expect(await listed("uploading")).toEqual([[training.id, { project: "triage" }]]);
    expect(await listed("ready")).toEqual([]);
    expectError(await call("/v1/trainings?status=finished", { token: account.userToken }), 422, "invalid_request");
  });
});

describe("the active-training limit", () => {
  it("refuses a create past LIMITS.activeTrainings with the 429 every limit gives: Retry-After and retry-after-ms", async () => {
    const account = await newAccount();
    const create = (key: string) => call("/v1/trainings", { token: account.userToken, body: { idempotency_key: key, input_bytes: 100 } });
    const made = [];
    for (let i = 0; i < LIMITS.activeTrainings; i++) made.push(await create(`limit-${i}`));
    expect(made.map((r) => r.status)).toEqual(Array(LIMITS.activeTrainings).fill(201));
    const refused = await create("one-more");
    expectError(refused, 429, "active_training_limit");
    expect(refused.headers.get("retry-after")).toBe("60");
    expect(refused.headers.get("retry-after-ms")).toBe("60000");
    // A cancelled training frees its slot.
    expect((await call(`/v1/trainings/${Training.parse(made[0]!.body).id}/cancel`, { token: account.userToken, body: {} })).status).toBe(200);
    expect((await create("after-cancel")).status).toBe(201);
  });

  it("refuses a create past LIMITS.storedTrainings kept (finished within their data period), naming the limit; a purged one frees its place", async () => {
    const account = await newAccount();
    // Rejected jobs keep their data 30 days: as many as the limit allows, finished now.
    await query(
      `INSERT INTO trainings (account_id, idempotency_key, base_model, object_key, expires_at, status, finished_at)
       SELECT $1, 'kept-' || g, 'svc-shared', 'trainings/' || gen_random_uuid() || '/examples.jsonl', now() + interval '1 day', 'rejected', now()
         FROM generate_series(1, $2::int) g`,
      [account.accountId, LIMITS.storedTrainings],
    );
    const refused = await call("/v1/trainings", { token: account.userToken, body: { idempotency_key: "one-more", input_bytes: 100 } });
    expectError(refused, 429, "stored_training_limit");
    expect(refused.headers.get("retry-after-ms")).toBe("60000");
    await query("UPDATE trainings SET purged_at = now() WHERE id = (SELECT id FROM trainings WHERE account_id = $1 LIMIT 1)", [account.accountId]);
    const made = await call("/v1/trainings", { token: account.userToken, body: { idempotency_key: "one-more", input_bytes: 100 } });
    expect(made.status).toBe(201);
    expect(Training.parse(made.body).limits).toMatchObject({ active_trainings: LIMITS.activeTrainings, stored_trainings: LIMITS.storedTrainings });
  });
});
