/**
 * The training job's steps (run by the sidecar's job worker, sidecar/jobs/worker.ts, one per GPU
 * host): claims training jobs whose base release this sidecar serves, under the job store's leases
 * and fences (server-shared/jobs/trainings.ts on store.ts). One step per claim, then the job is released:
 *
 * - validating: reads the training file through a short grant the edge signs and checks it
 *   (contract/training-file.ts) before any pass, with this worker's own checks (the base named by
 *   the file, one pass per question); a bad file fails the job naming the first bad line, a good one
 *   becomes its examples and the job runs.
 * - running, examples left: reads one example through the base model in the bulk lane (real-time
 *   goes first), in an order fixed by a hash of custom_id: its features (execute.ts exampleFeatures,
 *   exactly as the trained release will read a request) and the base release's served zero-shot
 *   answer, as two lane executions; committed under the fence, once per example, so a killed sidecar
 *   loses at most the example in flight. At each quarter of the examples, the current
 *   cross-validated figures.
 * - running, every example read: evaluates the candidate by k-fold cross-validation over every
 *   example beside the zero-shot answers (candidate.ts, the rule of contract/trainings.ts
 *   ACCEPTANCE), fits the served heads on all of them, and either rejects the job with its report or
 *   registers the candidate as an immutable release of the account (accepted). Folds and resampling
 *   are seeded by the training's id, so a fit repeated after a crash registers the same release.
 * - accepted: the serving side's check: this sidecar reads the new release's registry entry, derives
 *   its fingerprint from the base's, the task and the heads, and answers one probe decision with it
 *   through the base's runtime (every response's identity checked); only then is it served here and
 *   the job ready.
 *
 * An image training (its base an image backbone, registry modality "image") is the same job: its
 * file's examples name ready training assets of the account, which the job takes when it starts
 * (they then live while it runs and 30 days after); an example's step is one read of its canonical
 * PNG by the image runtime, through a grant; the head is fitted over the answers and "other" and
 * accepted against chance (contract/trainings.ts ACCEPTANCE), with its unknown detection reported.
 *
 *     const worker = new JobWorker([new TrainingSteps({ pool, lanes, selfUrl, secrets, edge })], { timing });
 */
import type { Pool } from "@neondatabase/serverless";
import { Questions as QuestionsSchema, type Answer, type ChoiceQuestion, type DecisionRequest } from "../../contract/decision.ts";
import type { JobError } from "../../contract/jobs.ts";
import { parseJson, stringifyJson } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { validateTrainingFile, type TrainingExample } from "../../contract/training-file.ts";
import { acceptanceOnTheWire, type Baseline, type EvaluationReport, type LabelAudit } from "../../contract/trainings.ts";
import { poolDb } from "../../server-shared/db.ts";
import { ImageAssetStore } from "../../server-shared/images.ts";
import { loggable } from "../../server-shared/errors.ts";
import { TrainingStore, type StoredExample, type TrainingClaim } from "../../server-shared/jobs/trainings.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { SecretReader } from "../../server-shared/secrets.ts";
import { savedQuestions, trainedFingerprint, trainedModelId, type SavedTask } from "../../server-shared/trained.ts";
import { ownedBy, runtimeClientFor, type ImageRuntimeClient, type RuntimeClient } from "../runtime/client.ts";
import { registeredRelease, servedRelease, servedReleaseIds } from "../runtime/registry.ts";
import { readInput, readGrant, type EdgeLink } from "../bulk/grants.ts";
import type { JobSteps } from "../jobs/worker.ts";
import { LaneFullError, LaneWaitTimeoutError, type Lanes } from "../lanes.ts";
import { executeDecision } from "../decide/execute.ts";
import { SERVED_STEPS } from "../decide/steps.ts";
import type { PassGroups } from "../decide/passes.ts";
import { BackgroundSlots } from "../bulk/records.ts";
import { exampleFeatures } from "../decide/trained.ts";
import { runtimeOf, verifiedRelease, type Release } from "../decide/identity.ts";
import { imageAnswer, readImageFeatures } from "../images/decide.ts";
import { OPTIONS_PER_PASS } from "../decide/render.ts";
import { adviceFor } from "./candidate.ts";
import { labelAuditOf, preferredCandidate } from "./label-audit.ts";
import { fitCandidate } from "./fitting.ts";
import { applyHead } from "./head.ts";

type Questions = ReturnType<typeof QuestionsSchema.parse>;
type Modality = "text" | "image";

export interface TrainingDeps {
  pool: Pool;
  lanes: Lanes;
  /** This sidecar's SIDECAR_URL: it trains on the base releases the registry assigns to it. */
  selfUrl: string;
  secrets: SecretReader;
  edge: EdgeLink;
  log?: (line: string) => void;
  /**
   * The background passes at the runtime, shared with the bulk worker (bulk/records.ts BackgroundSlots): a
   * bulk execution leaves the lane with its last passes still there, and a training example's passes
   * take their turn after them, in the background's groups. Its own when absent.
   */
  background?: BackgroundSlots;
}

/** How long a step waits before asking the bulk lane again when it is full. */
const LANE_POLL_MS = 200;

/** What a candidate is judged against: the base's zero-shot answers, or chance for an image model (contract/trainings.ts Baseline). */
const baselineOf = (modality: Modality): Baseline => (modality === "image" ? "chance" : "zero_shot");

/** A file this worker refuses after the shared checks passed (the same shape as theirs). */
const fileError = (code: string, message: string, line: number | null = null): JobError => ({ code, message, line });

export class TrainingSteps implements JobSteps<TrainingClaim> {
  readonly name = "training";
  private readonly log: (line: string) => void;
  private readonly store: TrainingStore;
  private readonly assets: ImageAssetStore;
  private readonly background: BackgroundSlots;

  constructor(private readonly deps: TrainingDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.background = deps.background ?? new BackgroundSlots();
    this.store = new TrainingStore(poolDb(deps.pool));
    this.assets = new ImageAssetStore(poolDb(deps.pool));
  }

  /** Leases the open training that waited longest whose base release this sidecar serves. */
  async claim(leaseMs: number): Promise<TrainingClaim | null> {
    return this.store.claimWork(leaseMs, await servedReleaseIds(this.deps.pool, this.deps.selfUrl));
  }

  renew(claim: TrainingClaim, leaseMs: number): Promise<boolean> {
    return this.store.renew(claim, leaseMs);
  }

  release(claim: TrainingClaim): Promise<void> {
    return this.store.release(claim);
  }

  /** One step of the claimed training, by its status; the worker releases it afterwards. */
  async step(claim: TrainingClaim, signal: AbortSignal): Promise<void> {
    const { status } = claim.row;
    if (status === "validating") await this.validate(claim, signal);
    else if (status === "running") await this.advance(claim, signal);
    else if (status === "accepted") await this.activate(claim, signal);
  }

  /** The base release the training runs on, checked as every execution checks its release. */
  private async base(claim: TrainingClaim): Promise<Base | null> {
    const entry = claim.row.base_release && (await servedRelease(this.deps.pool, this.deps.selfUrl, claim.row.base_release));
    if (!entry) return null;
    const release = await verifiedRelease(entry, { id: entry.id, fingerprint: entry.fingerprint });
    const client = runtimeClientFor(entry, this.deps.secrets);
    // A text runtime with a sentence encoder: each example's state is embedded too (features.ts).
    const encoder = entry.modality === "text" && (await client.identity()).encoder !== undefined;
    return { entry, release, client, text: ownedBy(client, claim.row.account_id), modality: entry.modality, encoder };
  }

  private async validate(claim: TrainingClaim, signal: AbortSignal): Promise<void> {
    const bytes = await readInput(this.deps.edge, claim.row.object_key, signal, LIMITS.trainingFileBytes);
    if (bytes === null) {
      await this.store.fail(claim, fileError("input_missing", "the training file is gone"));
      return;
    }
    const checked = validateTrainingFile(bytes);
    signal.throwIfAborted();
    if (!checked.ok) {
      await this.store.fail(claim, checked.error);
      return;
    }
    const { task, examples } = checked;
    const base = await this.base(claim);
    if (!base) return; // no longer served here: another host (or a later registry) takes it up
    const refused =
      modalityRefusal(base, task.modality) ??
      refusal(claim.row.base_model, task.model, task.questions, task.modality) ??
      (task.modality === "image" ? await this.assetRefusal(claim, examples) : null);
    if (refused) {
      await this.store.fail(claim, refused);
      return;
    }
    // Every example is held out once (k-fold acceptance), so the base's zero-shot answer is read for each.
    const stored: StoredExample[] = examples.map((e) => ({ ...e, heldOut: true }));
    await this.store.start(claim, { questions: stringifyJson(task.questions) }, stored);
  }

  /**
   * The first example whose image this training cannot take (not a ready training asset of the
   * account, expired, held by another open training, or the image of an earlier line again).
   */
  private async assetRefusal(claim: TrainingClaim, examples: TrainingExample[]): Promise<JobError | null> {
    const ids = examples.map((e) => e.assetId!);
    const usable = await this.assets.trainable([...new Set(ids)], claim.row.account_id, claim.id);
    const seen = new Map<string, number>();
    for (const example of examples) {
      const id = example.assetId!;
      const first = seen.get(id);
      if (first !== undefined) return fileError("invalid_example", `line ${example.line}: images.0.asset_id is line ${first}'s image again: every example has an image of its own`, example.line);
      seen.set(id, example.line);
      if (!usable.has(id)) {
        return fileError(
          "invalid_example",
          `line ${example.line}: images.0.asset_id names no ready training image of this account (finalize it with purpose "training"; an asset expires after 24 hours until a training takes it, and an open training's images are its own)`,
          example.line,
        );
      }
    }
    return null;
  }

  /** The backbone's features of a training image: its canonical PNG read by the image runtime through a grant. */
  private async imageFeatures(claim: TrainingClaim, base: Base, assetId: string, signal: AbortSignal): Promise<{ features: number[]; embedding: null }> {
    const canonical = await this.assets.canonical(assetId, claim.row.account_id);
    if (!canonical) throw new Error(`training ${claim.id}: its image ${assetId} is gone`);
    const grant = await readGrant(this.deps.edge, canonical.object, signal);
    const call = { image: { url: grant.url, headers: grant.headers }, bytes: canonical.bytes, sha256: canonical.sha256 };
    return { ...(await readImageFeatures(base.client, runtimeOf(base.release), call, signal)), embedding: null };
  }

  /** Runs the next example, or fits and evaluates the candidate once every example is read. */
  private async advance(claim: TrainingClaim, signal: AbortSignal): Promise<void> {
    const base = await this.base(claim);
    if (!base) return; // no longer served here: another host (or a later registry) takes it up
    const task = savedQuestions(claim.row.task!);
    const example = await this.store.nextExample(claim.id);
    if (!example) {
      await this.finish(claim, base, task, signal);
      return;
    }
    const request = { state: parseJson(example.state, { maxDepth: LIMITS.jsonDepth }), questions: task } as DecisionRequest;
    // Two executions, each no longer than a bulk record's, so that real-time never waits longer
    // behind training than behind bulk: the example's hidden-state passes, then the base's served
    // zero-shot decision (every example since k-fold acceptance; the held-out part in older jobs). An image example is one read of its image (its baseline,
    // chance, needs no pass).
    const assetId = example.assetId;
    const features = assetId
      ? await this.inBulkLane(claim, signal, () => this.imageFeatures(claim, base, assetId, signal))
      : await this.inBulkLane(claim, signal, () => exampleFeatures(base.text, base.release, request, signal, base.encoder, this.shared()));
    const zeroShot =
      features && example.heldOut && !assetId
        ? await this.inBulkLane(claim, signal, () => executeDecision(base.text, base.release, request, signal, SERVED_STEPS, this.shared()))
        : null;
    if (!features || (example.heldOut && !assetId && !zeroShot)) return;
    signal.throwIfAborted();
    const examplesRead = await this.store.commitExample(claim, example.line, features.features, zeroShot && distributions(task, zeroShot.answers), features.embedding);
    // At each quarter of the examples read (the last excepted: the report follows), the current
    // cross-validated figures (the inputs fixed, so at a quarter of the final evaluation's cost).
    const total = claim.row.total_examples;
    if (examplesRead !== null && examplesRead < total && Math.floor((examplesRead * 4) / total) > Math.floor(((examplesRead - 1) * 4) / total)) {
      const interim = await fitCandidate(task, base.modality, await this.store.readExamples(claim.id), { seed: claim.id, nested: false }, signal);
      if (interim) {
        await this.store.setInterim(claim, {
          baseline: baselineOf(base.modality),
          examples_read: examplesRead,
          training: interim.training,
          held_out: interim.heldOut,
          questions: interim.evaluations.map((e) => ({ question: e.question, metric: e.candidate.primary_metric, candidate: e.candidate.primary, zero_shot: e.zero_shot.primary, ece: e.candidate.ece })),
          measured_at: new Date().toISOString(),
        });
      }
    }
  }

  /** Where one execution's text passes go: the background's groups, shared with the bulk worker's, ranked after every pass started before. */
  private shared(): { groups: PassGroups; rank: number } {
    return this.background.nextPlace();
  }

  /** `run` in the bulk lane, waiting while the lane is full; null once the job's deadline has passed. */
  private async inBulkLane<T>(claim: TrainingClaim, signal: AbortSignal, run: () => Promise<T>): Promise<T | null> {
    for (;;) {
      try {
        return await this.deps.lanes.run("bulk", run, signal);
      } catch (err) {
        if (!(err instanceof LaneFullError || err instanceof LaneWaitTimeoutError)) throw err;
        if (Date.now() >= claim.deadline) return null;
        await new Promise((resolve) => setTimeout(resolve, LANE_POLL_MS));
        signal.throwIfAborted();
      }
    }
  }

  /** Evaluates the candidate by k-fold cross-validation over every example, fits the served heads on all of them, and rejects or registers it. */
  private async finish(claim: TrainingClaim, base: Base, task: Questions, signal: AbortSignal): Promise<void> {
    const started = performance.now();
    const examples = await this.store.readExamples(claim.id);
    const everyExample = await fitCandidate(task, base.modality, examples, { seed: claim.id, nested: true }, signal);
    if (!everyExample) {
      // The file's checks give every outcome LIMITS.trainingExamplesPerOutcome examples; this is a bug, not the customer's.
      throw new Error(`training ${claim.id}: an outcome has fewer examples than folds after every example was read`);
    }
    // The audit is always over every example; asked, a second candidate is trained without its suspects.
    const audit = labelAuditOf(examples, everyExample.audits, (question) => everyExample.evaluations.find((e) => e.question === question)!.outcomes);
    let candidate = everyExample;
    if (claim.row.exclude_suspected_labels) {
      const suspected = new Set(everyExample.audits.flatMap((a) => a.suspects.map((s) => s.index)));
      const kept = examples.filter((_, i) => !suspected.has(i));
      const without = suspected.size > 0 ? await fitCandidate(task, base.modality, kept, { seed: claim.id, nested: true }, signal) : null;
      const choice: NonNullable<LabelAudit["retrained"]> =
        suspected.size === 0
          ? { excluded: 0, kept: "all_examples", reason: "no label looked wrong" }
          : !without
            ? { excluded: suspected.size, kept: "all_examples", reason: "without them some answer had too few examples to cross-validate" }
            : { excluded: suspected.size, ...preferredCandidate(everyExample.evaluations, without.evaluations) };
      if (choice.kept === "without_suspected") candidate = without!;
      audit.retrained = choice;
    }
    const { heads, evaluations, training, heldOut, unknown } = candidate;
    const width = heads.features;
    const accepted = evaluations.every((e) => e.passed);
    const savedTask: SavedTask = claim.row.task!;
    const model = accepted ? trainedModelId(claim.row.base_model, claim.id) : null;
    const report: EvaluationReport = {
      object: "training.report",
      training: claim.id,
      model,
      base_release: base.entry.id,
      decision: accepted ? "accepted" : "rejected",
      baseline: baselineOf(base.modality),
      acceptance: acceptanceOnTheWire(),
      examples: { training, held_out: heldOut },
      method: {
        kind: heads.kind,
        features: width,
        regularisation: heads.questions.map((h) => h.lambda),
        ...(heads.kind === "hidden_state_head" ? { inputs: heads.questions.map((h) => h.inputs ?? ["answer_state"]) } : {}),
      },
      questions: evaluations,
      ...(unknown ? { unknown } : {}),
      learning_curve: candidate.curve,
      label_audit: audit,
      advice: adviceFor(evaluations, candidate.curve),
      evaluated_at: new Date().toISOString(),
      training_ms: Math.round(performance.now() - started),
    };
    if (!model) {
      await this.store.reject(claim, report);
      return;
    }
    const runtime = { id: base.entry.runtime_release, fingerprint: base.entry.runtime_fingerprint };
    const fingerprint = await trainedFingerprint(runtime.fingerprint, savedTask, heads);
    const description = `Trained on ${training} examples of ${claim.row.base_model} (training ${claim.id})`;
    await this.store.accept(claim, { id: model, fingerprint, baseRelease: runtime.id, description, task: savedTask, heads }, report);
  }

  /**
   * The serving side's identity check of an accepted candidate, then its activation: the release's
   * registry entry is checked as every execution checks one (its fingerprint derived from the base's,
   * the task and the heads), and one decision of a held-out example is answered with it through the
   * base's runtime, every response's identity checked. A mismatch leaves the job accepted, with the
   * operator told; it is never served.
   */
  private async activate(claim: TrainingClaim, signal: AbortSignal): Promise<void> {
    const base = await this.base(claim);
    const entry = base && claim.row.model_id ? await registeredRelease(this.deps.pool, claim.row.model_id) : null;
    if (!base || !entry) return;
    try {
      const release = await verifiedRelease(entry, { id: entry.id, fingerprint: entry.fingerprint });
      const task = savedQuestions(claim.row.task!);
      const probe = await this.store.anyExample(claim.id);
      const request = { state: probe ? parseJson(probe.state, { maxDepth: LIMITS.jsonDepth }) : "", questions: task } as DecisionRequest;
      const assetId = probe?.assetId;
      const answered = assetId
        ? await this.inBulkLane(claim, signal, async () => {
            const question = [...task.values()][0] as ChoiceQuestion;
            const { features } = await this.imageFeatures(claim, base, assetId, signal);
            return imageAnswer(question, applyHead(release.trained!.heads.questions[0]!, features));
          })
        : await this.inBulkLane(claim, signal, () => executeDecision(base.text, release, request, signal, SERVED_STEPS, this.shared()));
      if (!answered) return;
    } catch (err) {
      if (signal.aborted) throw err;
      this.log(`sidecar: training ${claim.id}: its model was not activated: ${loggable(err)}`);
      return;
    }
    signal.throwIfAborted();
    await this.store.activate(claim, this.deps.selfUrl);
  }
}

/** The base release a training runs on, its runtime client and what it reads. */
interface Base {
  entry: RegistryEntry;
  release: Release;
  client: RuntimeClient & ImageRuntimeClient;
  /** `client` for text passes, their kept prefixes owned by the training's account (ownedBy). */
  text: RuntimeClient;
  modality: Modality;
  /** The runtime has a sentence encoder (Identity `encoder`). */
  encoder: boolean;
}

/** A file whose examples are not what the base reads (images for a text model, or text for an image backbone), as the job's error. */
function modalityRefusal(base: Base, modality: Modality): JobError | null {
  if (modality === base.modality) return null;
  return modality === "image"
    ? fileError("task_mismatch", `the examples have images; the base ${JSON.stringify(base.entry.id)} reads text: train an image model on an image base (svc-image)`, 1)
    : fileError("task_mismatch", `the examples have no images; the base ${JSON.stringify(base.entry.id)} is an image backbone: every example needs one image`, 1);
}

/** Each question's answer as a distribution over its outcomes (yes/no: [yes, no]). */
function distributions(task: Questions, answers: Map<string, Answer>): number[][] {
  return [...task.keys()].map((id) => {
    const answer = answers.get(id)!;
    if (answer.type === "noul") return [answer.noul, 1 - answer.noul];
    return [...answer.probabilities.values()];
  });
}

/**
 * A file the shared checks passed but this service cannot train on, as the job's error: examples
 * naming another base than the training's, or a choice too large for one pass.
 */
function refusal(baseModel: string, model: string, questions: Questions, modality: Modality): JobError | null {
  if (model !== baseModel) {
    return fileError("task_mismatch", `the examples name the base ${JSON.stringify(model.slice(0, 60))}; this training was created for ${JSON.stringify(baseModel.slice(0, 60))}`, 1);
  }
  for (const [id, question] of questions) {
    if (modality === "text" && question.type === "choice" && question.criteria.size > OPTIONS_PER_PASS) {
      return fileError("task_not_trainable", `question ${JSON.stringify(id.slice(0, 40))} has ${question.criteria.size} options; a trained model reads at most ${OPTIONS_PER_PASS} in its one pass`, 1);
    }
  }
  return null;
}
