/**
 * Training jobs on the wire: a customer's labelled examples of one decision (training-file.ts) in,
 * a model of their own out, or an honest rejection with the figures that explain it. Edge, sidecar,
 * tests, SDKs and the CLI import these. The routes take the signed-in user's access token, as key
 * management does; an API key can neither start nor read a training.
 *
 *     POST /v1/trainings {"idempotency_key": "triage-v1", "input_bytes": 81920, "model": "svc-shared"}
 *       -> 201 Training, with `upload: {url, method: "PUT", headers, expires_at}`
 *     curl -T examples.jsonl -H "content-length: 81920" -H "if-none-match: *" "$url"
 *     POST /v1/trainings/{id}/submit {}           -> Training (queued)
 *     GET  /v1/trainings/{id}                     -> Training
 *     POST /v1/trainings/{id}/cancel {}           -> Training
 *     GET  /v1/trainings?limit=20&after=<id>      -> TrainingList, newest first
 *     GET  /v1/trainings/{id}/report              -> EvaluationReport (and /report.svg, its reliability diagram)
 *     POST /v1/models/{model}/retire {}           -> the retired model (the owner's trained models only)
 *
 * States:
 *
 *   uploading --submit--> queued --claim--> validating --(file good)--> running
 *   running --(every example read, candidate fitted and evaluated)--> accepted | rejected
 *   accepted --(the serving side reports the new release's identity)--> ready
 *   any non-terminal --cancel--> cancelled; validating --(file bad)--> failed; past its deadline --> expired
 *
 * `accepted` is "training passed": the candidate met the acceptance rule and is registered, but not
 * served yet. `ready` is "API ready": `model` answers in real-time decisions, bulk jobs and every
 * client. `rejected` keeps its report and its candidate is never served.
 */
import { z } from "zod";
import { CUSTOM_ID_MAX, Upload } from "./batches.ts";
import { IdempotencyKey, inputBytes, JobError, JobMetadata, noNul } from "./jobs.ts";
import { fields } from "./fields.ts";
import { LIMITS, SHARED_ALIAS } from "./limits.ts";

export const TRAINING_STATUSES = ["uploading", "queued", "validating", "running", "accepted", "ready", "rejected", "failed", "cancelled", "expired"] as const;
export const TrainingStatus = z.enum(TRAINING_STATUSES);
export type TrainingStatus = z.infer<typeof TrainingStatus>;

/** States a training never leaves (schema.sql training_status_terminal agrees, a test checks). */
export const TRAINING_TERMINAL_STATUSES: readonly TrainingStatus[] = ["ready", "rejected", "failed", "cancelled", "expired"];
export const isTrainingTerminal = (status: TrainingStatus) => TRAINING_TERMINAL_STATUSES.includes(status);

/** Trainings per page of GET /v1/trainings: the default, and the most `limit` may ask for. */
export const TRAINING_LIST_PAGE = { default: 20, max: 100 } as const;

/**
 * The acceptance rule, published. Every labelled example is held out once: the examples are dealt
 * into `folds` folds (stratified by outcome), and each fold's examples are answered by a candidate
 * fitted on the other folds, its inputs and regularisation chosen inside them; the model served is
 * then fitted on every example. On those out-of-fold answers, per question:
 *
 * - it must beat the baseline by the margin with confidence: the paired bootstrap (`resamples`
 *   resamples of the examples) of the candidate's primary figure (AUROC for a yes/no question, top-1
 *   accuracy otherwise) less the baseline's on the same examples has its lower `confidence` quantile
 *   at least `margin`. The baseline is the base release's served zero-shot answer to each example; for
 *   an image model (whose base answers no question) it is chance, each fold's training outcome
 *   frequencies ("other" included), and the margin `imageMargin`;
 * - it must be calibrated within the bound and its sampling error: its ECE (`eceBins` equal-width
 *   bins) at most `maxEce` plus the `confidence` quantile of the ECE a perfectly calibrated model with
 *   the same probabilities shows on as many examples (the calibration is fitted inside the folds).
 *
 * - at the ceiling: where the base's own figure is at least `ceiling` (a text model's base), it
 *   already answers about as well as can be answered, and no candidate can beat it by the margin. A
 *   candidate as good (its difference's lower quantile at least -`margin`) and better calibrated (a
 *   lower ECE than the base's) is accepted there; the rejection of any other says to use the shared
 *   model.
 *
 * Every outcome of every question needs LIMITS.trainingExamplesPerOutcome examples (the file's
 * checks). An image model's unknown detection (AUROC of the unknown mass, images of none of the
 * answers against the rest) is measured and reported, not part of the rule. Where the base already
 * answers as well as the examples can show (its figure near the top), no candidate can beat it by
 * the margin: the report says so.
 */
export const ACCEPTANCE = { margin: 0.02, maxEce: 0.1, eceBins: 10, imageMargin: 0.1, confidence: 0.95, folds: 5, resamples: 1000, ceiling: 0.98 } as const;

/**
 * What a trained text model's head can read, chosen per job by cross-validation: of its question's
 * pass, the base's final hidden state at the answer position, the state's hidden states pooled, and
 * the pass's own label log-probabilities (the zero-shot reading, uncalibrated); and the state's
 * sentence embedding by the runtime's sentence encoder (all-MiniLM-L6-v2), where it has one.
 */
export const FEATURE_BLOCKS = ["answer_state", "pooled_state", "label_logprobs", "sentence_embedding"] as const;
export const FeatureBlock = z.enum(FEATURE_BLOCKS);
export type FeatureBlock = z.infer<typeof FeatureBlock>;

export const CreateTrainingRequest = fields({
  idempotency_key: IdempotencyKey,
  /** The training file's size: its upload is bound to exactly this many bytes. */
  input_bytes: inputBytes(LIMITS.trainingFileBytes, "training file"),
  metadata: JobMetadata.optional(),
  /** The base model (alias or release id) every example's `body.model` names; the shared alias when absent. */
  model: z
    .string({ error: "model must be a string" })
    .min(1, "model must not be empty")
    .max(200, "model must be at most 200 characters")
    .refine(noNul, "model must not contain U+0000")
    .default(SHARED_ALIAS),
  /**
   * Train again without the examples whose given label looks wrong (the label audit), and keep
   * whichever candidate the acceptance rule prefers; the report's `label_audit.retrained` says which.
   */
  exclude_suspected_labels: z.boolean({ error: "exclude_suspected_labels must be true or false" }).optional(),
});
export type CreateTrainingRequest = z.infer<typeof CreateTrainingRequest>;

export const TrainingLimits = z.object({
  file_bytes: z.number().int(),
  examples: z.number().int(),
  examples_per_outcome: z.number().int(),
  custom_id_characters: z.number().int(),
  lifetime_seconds: z.number().int(),
  upload_validity_seconds: z.number().int(),
  data_retention_seconds: z.number().int(),
  /** Unfinished trainings an account may have at once, and trainings whose data it may keep at once (LIMITS). */
  active_trainings: z.number().int(),
  stored_trainings: z.number().int(),
  acceptance: z.object({
    margin: z.number(),
    max_ece: z.number(),
    ece_bins: z.number().int(),
    image_margin: z.number(),
    confidence: z.number(),
    folds: z.number().int(),
    resamples: z.number().int(),
    ceiling: z.number(),
  }),
});
export type TrainingLimits = z.infer<typeof TrainingLimits>;

export const TRAINING_LIMITS: TrainingLimits = {
  file_bytes: LIMITS.trainingFileBytes,
  examples: LIMITS.trainingFileExamples,
  examples_per_outcome: LIMITS.trainingExamplesPerOutcome,
  custom_id_characters: CUSTOM_ID_MAX,
  lifetime_seconds: LIMITS.trainingLifetimeMs / 1000,
  upload_validity_seconds: LIMITS.signedUploadValidityMs / 1000,
  data_retention_seconds: LIMITS.trainingDataRetentionMs / 1000,
  active_trainings: LIMITS.activeTrainings,
  stored_trainings: LIMITS.storedTrainings,
  acceptance: acceptanceOnTheWire(),
};

/** ACCEPTANCE as TrainingLimits and reports publish it. */
export function acceptanceOnTheWire(): TrainingLimits["acceptance"] {
  const a = ACCEPTANCE;
  return { margin: a.margin, max_ece: a.maxEce, ece_bins: a.eceBins, image_margin: a.imageMargin, confidence: a.confidence, folds: a.folds, resamples: a.resamples, ceiling: a.ceiling };
}

const Unit = z.number().min(0).max(1);

/** Held-out figures of one question, for the candidate or the base's zero-shot answers. */
/**
 * What a candidate is judged against, whose figures the `zero_shot` fields hold: the base model's
 * zero-shot answers (a text model), or chance (an image model: its backbone answers no question by
 * itself). `baselineName` is how people read it.
 */
export const Baseline = z.enum(["zero_shot", "chance"]);
export type Baseline = z.infer<typeof Baseline>;
export const baselineName = (baseline: Baseline | undefined) => (baseline === "chance" ? "chance" : "zero-shot");

export const QuestionFigures = z.object({
  items: z.number().int().nonnegative(),
  /** AUROC of p(yes) for a yes/no question, top-1 accuracy otherwise: what acceptance compares. */
  primary: Unit,
  primary_metric: z.enum(["auroc", "top1"]),
  accuracy: Unit,
  log_loss: z.number().nonnegative(),
  ece: Unit,
  brier: z.number().min(0).max(2),
});
export type QuestionFigures = z.infer<typeof QuestionFigures>;

export const ReliabilityBins = z.array(
  z.object({ lower: Unit, upper: Unit, count: z.number().int().nonnegative(), mean_confidence: Unit.nullable(), accuracy: Unit.nullable() }),
);

export const QuestionEvaluation = z.object({
  question: z.string(),
  type: z.enum(["noul", "choice", "score"]),
  /** Held-out examples per outcome, in the question's outcome order, and the outcomes' names (an image model's "other" is null, last). */
  outcomes: z.array(z.union([z.boolean(), z.string(), z.number(), z.null()])),
  held_out_counts: z.array(z.number().int().nonnegative()),
  candidate: QuestionFigures,
  /** The baseline's figures (the report's `baseline`): the base's zero-shot answers; for an image model, chance (ACCEPTANCE). */
  zero_shot: QuestionFigures,
  reliability_candidate: ReliabilityBins,
  reliability_zero_shot: ReliabilityBins,
  /**
   * The sampling error the rule judged with (ACCEPTANCE): bootstrap intervals at `confidence` of the
   * candidate's and the baseline's primary figures, of their difference and of the candidate's ECE;
   * `ece_noise`, what ECE a perfectly calibrated model shows on this many examples (the allowance over
   * the bound); `debiased_ece`, the ECE less that noise's median. Absent from reports before k-fold acceptance.
   */
  uncertainty: z
    .object({
      confidence: Unit,
      candidate_primary: z.object({ low: Unit, high: Unit }),
      zero_shot_primary: z.object({ low: Unit, high: Unit }),
      difference: z.object({ estimate: z.number().min(-1).max(1), low: z.number().min(-1).max(1), high: z.number().min(-1).max(1) }),
      candidate_ece: z.object({ low: Unit, high: Unit }),
      ece_noise: Unit,
      debiased_ece: Unit,
      /** The baseline's ECE on the same examples, and whether its primary figure is at the ceiling (ACCEPTANCE). */
      zero_shot_ece: Unit,
      at_ceiling: z.boolean(),
    })
    .optional(),
  /**
   * The out-of-fold answers against the truth: `confusion[t][a]` counts the examples of outcome t
   * whose most likely answer was a, both in `outcomes` order; `per_outcome` each outcome's precision
   * (null when never answered) and recall. Absent from reports before k-fold acceptance.
   */
  confusion: z.array(z.array(z.number().int().nonnegative())).optional(),
  per_outcome: z.array(z.object({ precision: Unit.nullable(), recall: Unit.nullable() })).optional(),
  /** Whether this question met the rule, and why not when it did not. */
  passed: z.boolean(),
  reason: z.string().nullable(),
});
export type QuestionEvaluation = z.infer<typeof QuestionEvaluation>;

/** An outcome of a question as a report names it (QuestionEvaluation.outcomes): an image model's "other" is null. */
const OutcomeName = z.union([z.boolean(), z.string(), z.number(), z.null()]);

/**
 * An example whose given label looks wrong (the label audit): its `custom_id` and line in the
 * training file, the question, the label given and the answer the model prefers, each with its
 * out-of-fold probability (the given one is the example's label quality).
 */
export const LabelIssue = z.object({
  custom_id: z.string(),
  line: z.number().int().positive(),
  question: z.string(),
  given: OutcomeName,
  preferred: OutcomeName,
  given_probability: Unit,
  preferred_probability: Unit,
});
export type LabelIssue = z.infer<typeof LabelIssue>;

/**
 * Label issues per page of GET /v1/trainings/{id}/label_issues and in the report: the default, and
 * the most `limit` may ask for; and the most an audit lists, lowest label quality first (`suspected`
 * still counts every one).
 */
export const LABEL_ISSUE_PAGE = { default: 20, max: 100, listed: LIMITS.trainingFileExamples } as const;

/**
 * The label audit: confident learning over every example's out-of-fold answer (each answered by
 * heads fitted without it, as the acceptance answers them). `suspected` counts the label issues of
 * every question, `issues` lists the first LABEL_ISSUE_PAGE.default of them, lowest label quality
 * first, and `has_more` says whether GET /v1/trainings/{id}/label_issues has more.
 */
export const LabelAudit = z.object({
  method: z.literal("confident_learning"),
  examples: z.number().int().nonnegative(),
  suspected: z.number().int().nonnegative(),
  issues: z.array(LabelIssue),
  has_more: z.boolean(),
  /**
   * With `exclude_suspected_labels`: how many examples were left out of the second candidate (every
   * example with an issue), which candidate the report and the model are (`all_examples` or
   * `without_suspected`) and why. Absent when the training did not ask for it.
   */
  retrained: z
    .object({ excluded: z.number().int().nonnegative(), kept: z.enum(["all_examples", "without_suspected"]), reason: z.string() })
    .optional(),
});
export type LabelAudit = z.infer<typeof LabelAudit>;

/** A page of a training's label issues, in the audit's order: GET /v1/trainings/{id}/label_issues?limit=&after= (after: the last `rank` seen). */
export const LabelIssueList = z.object({
  object: z.literal("list"),
  data: z.array(LabelIssue.extend({ rank: z.number().int().positive() })),
  has_more: z.boolean(),
});
export type LabelIssueList = z.infer<typeof LabelIssueList>;

/** A candidate's evaluation, accepted or rejected: GET /v1/trainings/{id}/report. */
export const EvaluationReport = z.object({
  object: z.literal("training.report"),
  training: z.string(),
  /** The trained model's id when accepted; null when rejected. */
  model: z.string().nullable(),
  base_release: z.string(),
  decision: z.enum(["accepted", "rejected"]),
  /** What the `zero_shot` figures are (Baseline); absent from reports before it, which are all zero-shot. */
  baseline: Baseline.optional(),
  acceptance: TrainingLimits.shape.acceptance,
  examples: z.object({ training: z.number().int(), held_out: z.number().int() }),
  /**
   * What was trained: a head per question on the base's hidden state at the answer position, or
   * (an image model) one head on the image backbone's pooled features, over the answers and "other".
   */
  method: z.object({
    kind: z.enum(["hidden_state_head", "image_head"]),
    features: z.number().int(),
    regularisation: z.array(z.number()),
    /** A text model's inputs per question (FEATURE_BLOCKS), as cross-validation chose them; absent for an image model. */
    inputs: z.array(z.array(FeatureBlock)).optional(),
  }),
  questions: z.array(QuestionEvaluation),
  /**
   * An image model's unknown detection on the held-out images: how well its unknown mass (the
   * probability of "other") ranks the images of none of the answers above the rest (AUROC; null
   * when one side is empty), and its mean on each side. Absent for a text model.
   */
  unknown: z
    .object({ held_out_other: z.number().int(), held_out_known: z.number().int(), auroc: Unit.nullable(), mean_other: Unit, mean_known: Unit })
    .optional(),
  /**
   * The learning curve over the examples given: the cross-validated primary figure of a candidate
   * fitted on a quarter, half, three quarters and all of them (each a stratified subset of the next,
   * the inputs fixed to the served model's), beside the baseline's on the same examples. A curve still
   * rising at the end says more examples would likely help. Absent from reports before it.
   */
  learning_curve: z
    .array(z.object({ examples: z.number().int().positive(), questions: z.array(z.object({ question: z.string(), candidate: Unit, zero_shot: Unit })) }))
    .optional(),
  /** The label audit (LabelAudit); absent from reports before it. */
  label_audit: LabelAudit.optional(),
  /** What to do next, in a sentence (use the shared model, add examples, check the labels); null when there is nothing to add. */
  advice: z.string().nullable().optional(),
  evaluated_at: z.string(),
  training_ms: z.number().nonnegative(),
});
export type EvaluationReport = z.infer<typeof EvaluationReport>;

/**
 * A report as the routes send it: its label audit (kept whole with the report) cut to its first page
 * of issues, `has_more` saying whether GET /v1/trainings/{id}/label_issues has more.
 */
export function reportOnTheWire(report: EvaluationReport): EvaluationReport {
  const audit = report.label_audit;
  if (!audit) return report;
  return { ...report, label_audit: { ...audit, issues: audit.issues.slice(0, LABEL_ISSUE_PAGE.default), has_more: audit.issues.length > LABEL_ISSUE_PAGE.default } };
}

/** The page of a report's label issues ranked after `after` (0: from the first), at most `limit`; empty for a report without an audit. */
export function labelIssuePage(report: EvaluationReport, after: number, limit: number): LabelIssueList {
  const issues = report.label_audit?.issues ?? [];
  const page = issues.slice(after, after + limit).map((issue, i) => ({ ...issue, rank: after + i + 1 }));
  return { object: "list", data: page, has_more: after + limit < issues.length };
}

/** One question's current held-out figures: the candidate's primary figure and ECE beside the base's zero-shot one. */
const CurrentFigures = z.object({ question: z.string(), metric: z.enum(["auroc", "top1"]), candidate: Unit, zero_shot: Unit, ece: Unit });

/**
 * The held-out figures while examples are still being read: a candidate fitted on the training
 * examples read so far, on the held-out examples read so far, beside the base's zero-shot answers to
 * them. Measured as each quarter of the examples is read; the final figures are the report's.
 */
export const InterimEvaluation = z.object({
  /** What the `zero_shot` figures are (Baseline); absent before it (zero-shot). */
  baseline: Baseline.optional(),
  examples_read: z.number().int(),
  training: z.number().int(),
  held_out: z.number().int(),
  questions: z.array(CurrentFigures),
  measured_at: z.string(),
});
export type InterimEvaluation = z.infer<typeof InterimEvaluation>;

export const TrainingProgress = z.object({
  /** What the job is doing now, in words a person can act on. */
  step: z.string(),
  examples_total: z.number().int(),
  /** Examples whose passes have run (features, and the base's zero-shot answers for held-out ones). */
  examples_read: z.number().int(),
  /** Examples read per minute over the last minutes, and when the reading may be done at that rate. */
  examples_per_minute: z.number(),
  estimated_completion_at: z.string().nullable(),
  /** The current held-out figures (InterimEvaluation); null until a quarter of the examples is read. */
  held_out: InterimEvaluation.nullable(),
});
export type TrainingProgress = z.infer<typeof TrainingProgress>;

export const Training = z.object({
  id: z.string().uuid(),
  object: z.literal("training"),
  status: TrainingStatus,
  idempotency_key: z.string(),
  /** The caller's pairs given at create; null when none were. */
  metadata: z.record(z.string(), z.string()).nullable(),
  /** The base model as asked, and the release it resolved to at submit (null before). */
  base_model: z.string(),
  base_release: z.string().nullable(),
  /** The trained model's id once accepted (it answers once `ready`); null otherwise. */
  model: z.string().nullable(),
  created_at: z.string(),
  input_bytes: z.number().int().nullable(),
  submitted_at: z.string().nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  expires_at: z.string(),
  /** When the training file and examples are deleted; null until terminal. */
  data_expires_at: z.string().nullable(),
  examples: z.object({ total: z.number().int(), held_out: z.number().int() }),
  error: JobError.nullable(),
  progress: TrainingProgress.nullable(),
  /** Held-out figures once evaluated: per question, the candidate's and the baseline's primary figure and ECE. */
  evaluation: z
    .object({
      decision: z.enum(["accepted", "rejected"]),
      /** What the `zero_shot` figures are (Baseline). */
      baseline: Baseline,
      report: z.string(),
      questions: z.array(z.object({ question: z.string(), metric: z.enum(["auroc", "top1"]), candidate: Unit, zero_shot: Unit, ece: Unit, passed: z.boolean() })),
    })
    .nullable(),
  limits: TrainingLimits,
  upload: Upload.optional(),
});
export type Training = z.infer<typeof Training>;

export const TrainingList = z.object({
  object: z.literal("list"),
  data: z.array(Training),
  has_more: z.boolean(),
  next_cursor: z.string().nullable(),
});
export type TrainingList = z.infer<typeof TrainingList>;
